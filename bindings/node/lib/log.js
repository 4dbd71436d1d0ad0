'use strict';
// Diagnostics: the library's log lines go to the main thread's logger (console.warn by default).
const koffi = require('koffi');
const { promisify } = require('node:util');
const { isMainThread } = require('node:worker_threads');

const { DEFAULT_PROBE_TIMEOUT_MS, LEVELS, RESULT, RESULT_NAMES } = require('./abi.js');
const { timeoutMs } = require('./args.js');
const { check } = require('./error.js');
const { c, LogCallback } = require('./library.js');

// The library logs process-wide, through one callback, and a callback belongs to the JS thread
// that registered it: one registered by a worker would be called after the worker is gone, which
// aborts the process. So only the main thread registers one, and every line, whichever thread's
// request logged it, goes to the main thread's logger. In a process where only workers load the
// package, lines go to stderr (the library's default).
let logger = (level, message) => console.warn(`synaps-scope: ${level}: ${message}`);
if (isMainThread) {
  const logTrampoline = koffi.register((_userdata, level, message) => {
    try {
      if (logger) logger(LEVELS[level] ?? 'trace', message);
    } catch {
      // A throwing logger must not unwind into the library.
    }
  }, koffi.pointer(LogCallback));
  c.setLogCallback(logTrampoline, null);
}

/**
 * Sends the library's log lines to `fn(level, message)`; null silences them. Default: console.warn.
 * The main thread's logger receives every line, also those of requests made in workers; in a
 * worker, setLogger throws, since no line would ever reach it.
 */
function setLogger(fn) {
  if (fn !== null && typeof fn !== 'function') throw new TypeError('setLogger takes a function or null');
  if (!isMainThread) {
    throw new Error('synaps-scope: setLogger works on the main thread only: the library logs process-wide, and every line goes to the main thread\'s logger');
  }
  logger = fn;
}

/**
 * For a program about to exit: waits at most `timeoutMs` (default 3000) for the background slice
 * checks still running, so that their warnings reach the logger, then logs a warning for each check
 * that got no answer. Resolves true when every check had finished.
 */
async function flushWarnings(timeoutMs_ = DEFAULT_PROBE_TIMEOUT_MS) {
  const ms = timeoutMs(timeoutMs_, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS);
  const result = await promisify(c.flushWarnings.async)(ms);
  if (result === RESULT.TIMED_OUT) return false;
  check(result, `flushing warnings failed (${RESULT_NAMES[result] ?? result})`);
  return true;
}

/** The most detailed level delivered: 'error', 'warn' (the default), 'info', 'debug' or 'trace'. */
function setLogLevel(level) {
  const number = LEVELS.indexOf(level);
  if (number < 1) throw new TypeError(`unknown log level ${JSON.stringify(level)}`);
  check(c.setLogLevel(number));
}

module.exports = { flushWarnings, setLogLevel, setLogger };
