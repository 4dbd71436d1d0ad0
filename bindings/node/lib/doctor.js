'use strict';
// The report `synaps-scope doctor` prints, for Node.
const koffi = require('koffi');

const { DEFAULT_PROBE_TIMEOUT_MS } = require('./abi.js');
const { envArray, timeoutMs } = require('./args.js');
const { callBlocking } = require('./error.js');
const { c, libraryPath } = require('./library.js');

/**
 * The report `synaps-scope doctor` prints: which library and launcher program this package uses and
 * how they were found, the user manager, the configuration, and whether launches of each kind would
 * run in scopes, and why not. Runs the same checks a launch runs, each bounded by `timeoutMs`
 * (default 3000), on a worker thread. `npx synaps-scope doctor` prints it.
 */
async function doctor({ env, timeoutMs: ms } = {}) {
  const out = [null];
  await callBlocking(c.doctor, envArray(env), timeoutMs(ms, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS), out);
  try {
    return `library:       ${libraryPath}\n${koffi.decode(out[0], 'char', -1)}`;
  } finally {
    c.stringFree(out[0]);
  }
}

module.exports = { doctor };
