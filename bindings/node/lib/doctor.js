'use strict';
// The report `synaps-scope doctor` prints and its verdict, for Node.
const koffi = require('koffi');

const { DEFAULT_PROBE_TIMEOUT_MS, VERDICT_NAMES, word } = require('./abi.js');
const { envArray, timeoutMs } = require('./args.js');
const { callBlocking } = require('./error.js');
const { c, libraryPath } = require('./library.js');

/**
 * The report `synaps-scope doctor` prints and its verdict: which library and launcher program this
 * package uses and how they were found, the user manager, the configuration, and whether launches
 * of each kind would run in scopes, and why not. Runs the same checks a launch runs, each bounded by
 * `timeoutMs` (default 3000), on a worker thread. `npx synaps-scope doctor` prints it and exits with
 * `exitCode`.
 */
async function diagnose({ env, timeoutMs: ms } = {}) {
  const out = [null];
  const verdict = [0];
  await callBlocking(c.diagnose, envArray(env), timeoutMs(ms, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS), out, verdict);
  try {
    return {
      report: `library:       ${libraryPath}\n${koffi.decode(out[0], 'char', -1)}`,
      verdict: word(VERDICT_NAMES[verdict[0]]),
      words: c.verdictWords(verdict[0]),
      exitCode: verdict[0],
    };
  } finally {
    c.stringFree(out[0]);
  }
}

/** The report of `diagnose`, without its verdict. */
async function doctor(options) {
  return (await diagnose(options)).report;
}

module.exports = { diagnose, doctor };
