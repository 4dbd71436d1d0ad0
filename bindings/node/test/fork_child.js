// @ts-check
'use strict';
// The child of fork.test.js: one request within the bound given, its answer sent to the parent.
const scope = require('..');

const boundMs = Number(process.argv[2]);
const started = performance.now();
scope.launcherForEnv({ env: process.env, probeTimeoutMs: boundMs }).then((launcher) => {
  process.send?.({ scoped: launcher !== null, tookMs: performance.now() - started }, () => process.exit(0));
});
