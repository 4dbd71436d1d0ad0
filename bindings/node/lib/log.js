'use strict';
// Diagnostics: the library's log lines go to the main thread's logger (console.warn by default).
const { promisify } = require('node:util');
const { isMainThread } = require('node:worker_threads');

const { DEFAULT_PROBE_TIMEOUT_MS, LEVELS, RESULT, RESULT_NAMES } = require('./abi.js');
const { timeoutMs } = require('./args.js');
const { check } = require('./error.js');
const { c } = require('./library.js');
const { AnswerQueue } = require('./queue.js');

// The library logs process-wide, through one sink, and lines come from any of its threads. Only the
// main thread takes them, from a queue of their own (`AnswerQueue`: the library never calls into
// JavaScript), so every line, whichever thread's request logged it, goes to the main thread's
// logger: on the next turn of its loop, right after a blocking call of the package, before a
// flushWarnings() resolves, and at the process's exit. In a process where only workers load the
// package, lines go to stderr (the library's default), as they do should the queue fail.
let logger = (level, message) => console.warn(`synaps-scope: ${level}: ${message}`);
/** The main thread's queue of log lines. */
let lines = null;
if (isMainThread) {
  lines = new AnswerQueue((answer) => {
    const level = [0];
    const message = c.answerLogLine(answer, level);
    try {
      if (logger && message !== null) logger(LEVELS[level[0]] ?? 'trace', message);
    } catch {
      // A throwing logger must not stop the lines after it.
    }
  }, () => {
    lines = null;
    c.setLogQueue(null, 0);
  });
  check(c.setLogQueue(lines.pointer, 0));
  process.on('exit', deliverLogLines);
}

/** Hands the log lines waiting to the logger now (after a blocking call that may have logged). */
function deliverLogLines() {
  lines?.drain();
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
  // The checks' lines are queued by now: they reach the logger before this resolves.
  deliverLogLines();
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

module.exports = { deliverLogLines, flushWarnings, setLogLevel, setLogger };
