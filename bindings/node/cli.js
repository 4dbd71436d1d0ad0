#!/usr/bin/env node
'use strict';
// `npx synaps-scope doctor`: what this installation of the package finds (its library and launcher
// program, and how each was found, the user manager, the configuration) and whether launches would
// run in scopes. Exits as `synaps-scope doctor` does: 0 scoped, 1 direct, 2 usage error or bad
// input, 3 refused (required mode).

const usage = `usage: synaps-scope doctor [--timeout-ms N]
exit status: 0 scoped, 1 direct, 2 usage error or bad input, 3 required mode would refuse`;
const args = process.argv.slice(2);
if (args[0] !== 'doctor' || !(args.length === 1 || (args.length === 3 && args[1] === '--timeout-ms'))) {
  console.error(usage);
  process.exit(2);
}
const timeoutMs = args.length === 3 ? Number(args[2]) : undefined;
require('./index.js')
  .diagnose({ timeoutMs })
  .then(({ report, exitCode }) => {
    process.stdout.write(report);
    process.exitCode = exitCode;
  })
  .catch((error) => {
    console.error(error.message);
    process.exitCode = 2;
  });
