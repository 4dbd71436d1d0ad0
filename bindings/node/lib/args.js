'use strict';
// Arguments as Node hands them over, turned into what the C ABI takes: strings, NULL-terminated
// arrays, numbers its types can hold.
const { KINDS } = require('./abi.js');

// Strings only, as for child_process.spawn: koffi passes them to C as UTF-8.
function cString(value, what) {
  if (typeof value !== 'string') {
    throw new TypeError(`${what} must be a string, not ${value === null ? 'null' : typeof value}`);
  }
  if (value.includes('\0')) throw new TypeError(`${what} cannot contain NUL characters`);
  return value;
}

/** `KEY=VALUE` entries of `env` (undefined: process.env), NULL-terminated for the C ABI. */
function envArray(env) {
  const source = env ?? process.env;
  if (typeof source !== 'object' || source === null || Array.isArray(source)) {
    throw new TypeError('env must be an object of environment variables');
  }
  const entries = [];
  for (const [key, value] of Object.entries(source)) {
    if (value === undefined) continue;
    // As on every surface: a key that is empty or holds '=' cannot be one variable.
    if (key === '') throw new TypeError('an environment key cannot be empty');
    if (key.includes('=')) throw new TypeError(`environment key ${JSON.stringify(key)} contains '='`);
    entries.push(cString(`${key}=${value}`, `environment variable ${key}`));
  }
  entries.push(null);
  return entries;
}

function argvArray(argv) {
  if (!Array.isArray(argv)) throw new TypeError('argv must be an array of strings');
  return [...argv.map((arg, i) => cString(arg, `argv[${i}]`)), null];
}

function cwdArg(cwd) {
  if (cwd === undefined || cwd === null) return null;
  if (cwd instanceof URL) return cString(require('node:url').fileURLToPath(cwd), 'cwd');
  return cString(cwd, 'cwd');
}

function kindNumber(kind) {
  if (!Object.hasOwn(KINDS, kind)) throw new TypeError(`kind must be 'tool' or 'daemon', not ${JSON.stringify(kind)}`);
  return KINDS[kind];
}

/**
 * A process id as the C ABI's uint32_t takes it: a number that type cannot hold throws here (koffi
 * would turn 1.5 into pid 1 and 2^32 + N into pid N); which numbers are pids (1 to 2^31 - 1) is the
 * library's one rule, refused by it with SCOPE_INVALID_ARGUMENT.
 */
function pidArg(value) {
  if (typeof value !== 'number') throw new TypeError(`pid must be a number, not ${typeof value}`);
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`pid must be a whole number from 1 to 2147483647, not ${value}`);
  }
  return value;
}

function timeoutMs(value, what, fallback) {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1 || value > 0xffffffff) {
    throw new RangeError(`${what} must be a whole number of milliseconds from 1, not ${value}`);
  }
  return value;
}

module.exports = { argvArray, cString, cwdArg, envArray, kindNumber, pidArg, timeoutMs };
