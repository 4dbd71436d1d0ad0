'use strict';
// The library's failures as Node's errors: the one map from its result codes (the core's classes
// of failure, through the C ABI's one map) to the errors this package throws.

const { RESULT, RESULT_NAMES } = require('./abi.js');
const { c } = require('./library.js');

/** A failed call of the library: `code` is the scope_result name, `result` its number. */
class ScopeError extends Error {
  constructor(result, message) {
    super(message);
    this.name = 'ScopeError';
    this.result = result;
    this.code = `SCOPE_${RESULT_NAMES[result] ?? 'UNKNOWN'}`;
  }
}

/** `process_scopes = required`, and scopes are unavailable for this launch. */
class ScopeRequiredError extends ScopeError {
  constructor(result, message) {
    super(result, message);
    this.name = 'ScopeRequiredError';
  }
}

/**
 * The error for a failed `result`; the message is `detail`, or the calling thread's last error. A
 * missing `program` (NOT_FOUND from resolving one) is Node's own ENOENT, as a spawn of it reports.
 */
function failure(result, detail, { program } = {}) {
  const message = `synaps-scope: ${detail ?? c.lastError()}`;
  if (result === RESULT.REQUIRED_UNAVAILABLE) return new ScopeRequiredError(result, message);
  if (result === RESULT.NOT_FOUND && program !== undefined) {
    return Object.assign(new Error(message), { code: 'ENOENT', errno: -2, path: program });
  }
  return new ScopeError(result, message);
}

/** Throws for a failed `result` (`about`: as `failure` takes it). */
function check(result, detail, about) {
  if (result !== RESULT.OK) throw failure(result, detail, about);
}

const ERROR_BUFFER = 1024;

/**
 * Calls one of the library's `_r` functions on a koffi worker thread, so the event loop never
 * waits on it; the worker's last error comes back through the trailing buffer arguments.
 */
async function callBlocking(fn, ...args) {
  const error = Buffer.alloc(ERROR_BUFFER);
  const result = await new Promise((resolve, reject) => {
    fn.async(...args, error, ERROR_BUFFER, (failed, value) => {
      // koffi keeps no reference to an async call's Buffer arguments (the C arrays of args.js),
      // which the worker thread reads: this callback, which koffi keeps, holds them till it runs.
      keepUntilHere(args, error);
      if (failed) reject(failed);
      else resolve(value);
    });
  });
  check(result, error.subarray(0, error.indexOf(0)).toString('utf8'));
}

/** Names what a callback must keep alive until it runs (a closure keeps what it names). */
function keepUntilHere(...values) {
  return values;
}

/** The same `_r` function, on this thread. */
function callHere(fn, ...args) {
  check(fn(...args, null, 0));
}

module.exports = { ScopeError, ScopeRequiredError, callBlocking, callHere, check, failure };
