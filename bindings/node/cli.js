#!/usr/bin/env node
'use strict';
// `npx synaps-scope doctor`: what this installation of the package finds (its library and launcher
// program, and how each was found, the user manager, the configuration) and whether launches would
// run in scopes. Exits as `synaps-scope doctor` does: 0 scoped, 1 direct, 2 refused (required mode).

const usage = 'usage: synaps-scope doctor [--timeout-ms N]';
const args = process.argv.slice(2);
if (args[0] !== 'doctor' || !(args.length === 1 || (args.length === 3 && args[1] === '--timeout-ms'))) {
  console.error(usage);
  process.exit(2);
}
const timeoutMs = args.length === 3 ? Number(args[2]) : undefined;
require('./index.js')
  .doctor({ timeoutMs })
  .then((report) => {
    process.stdout.write(report);
    const verdict = /\(exit (\d+)\)\s*$/.exec(report);
    process.exitCode = verdict ? Number(verdict[1]) : 2;
  })
  .catch((error) => {
    console.error(error.message);
    process.exitCode = 2;
  });
