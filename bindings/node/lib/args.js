'use strict';
// Arguments as Node hands them over, decoded into what the C ABI takes (strings, C arrays laid out
// in Buffers of the package's own, numbers its types can hold) and nothing more: the library's intake checks every value
// (an environment entry, a bound, a pid, a kind) as it does on every surface, and refuses a bad one
// with its own class and words. What is refused here is only what cannot be written in the C types
// at all: a value of the wrong JavaScript type, a number a uint32_t cannot hold, and a NUL or an
// environment key with '=' that a C string or a `KEY=VALUE` entry cannot carry.
const koffi = require('koffi');

const { RESULT } = require('./abi.js');
const { ScopeError, check } = require('./error.js');
const { c } = require('./library.js');

// Strings only, as for child_process.spawn: koffi passes them to C as UTF-8.
function cString(value, what) {
  if (typeof value !== 'string') {
    throw new TypeError(`${what} must be a string, not ${value === null ? 'null' : typeof value}`);
  }
  if (value.includes('\0')) throw new TypeError(`${what} cannot contain NUL characters`);
  return value;
}

const POINTER_SIZE = koffi.sizeof('void *');

/** Pointer slots over `block`'s first `count` pointers, and how to write an address in one. */
function pointerSlots(block, count) {
  if (POINTER_SIZE === 8) {
    const slots = new BigUint64Array(block.buffer, block.byteOffset, count);
    return (i, address) => { slots[i] = address; };
  }
  const slots = new Uint32Array(block.buffer, block.byteOffset, count);
  return (i, address) => { slots[i] = Number(address); };
}

/**
 * `strings` (a null among them: a NULL pointer) as C reads an array of `const char *`, laid out in
 * one Buffer of the package's own: the pointers, then each string's UTF-8 bytes and its NUL. koffi
 * passes a Buffer as its address and converts nothing in it, where it converts a JS array element
 * by element and, when the thread is being terminated (a Worker's `terminate()`), makes the call
 * with elements it could not read: a Worker terminated mid-launch crashed its host. The strings
 * share the pointers' Buffer, so the argument that keeps one alive through the call keeps both.
 */
function cArray(strings) {
  const head = strings.length * POINTER_SIZE;
  let size = head;
  for (const string of strings) if (string !== null) size += Buffer.byteLength(string, 'utf8') + 1;
  // Buffer.alloc never slices the shared pool: the block starts on a fresh, aligned allocation.
  const block = Buffer.alloc(size);
  const setPointer = pointerSlots(block, strings.length);
  const base = koffi.address(block);
  let at = head;
  strings.forEach((string, i) => {
    if (string === null) return;
    setPointer(i, base + BigInt(at));
    at += block.write(string, at, 'utf8') + 1;
  });
  return block;
}

/**
 * `pointers` (koffi pointers) as C reads an array of them, in a Buffer of ours (see cArray); never
 * an empty Buffer, which koffi passes as NULL, where the C ABI takes an empty array at an address.
 */
function cPointerArray(pointers) {
  const block = Buffer.alloc(Math.max(1, pointers.length) * POINTER_SIZE);
  const setPointer = pointerSlots(block, pointers.length);
  pointers.forEach((pointer, i) => setPointer(i, koffi.address(pointer)));
  return block;
}

/**
 * `KEY=VALUE` entries of `env` (undefined: process.env), NULL-terminated for the C ABI. An entry
 * that cannot be written as one (a key with '=' would read back as another key; a C string ends
 * at NUL) is refused as the library refuses such an entry: INVALID_ARGUMENT.
 */
function envArray(env) {
  const source = env ?? process.env;
  if (typeof source !== 'object' || source === null || Array.isArray(source)) {
    throw new TypeError('env must be an object of environment variables');
  }
  const entries = [];
  for (const [key, value] of Object.entries(source)) {
    if (value === undefined) continue;
    const entry = `${key}=${value}`;
    const unwritable = key.includes('=') ? "its key contains '='" : entry.includes('\0') ? 'it contains a NUL byte' : null;
    if (unwritable !== null) {
      const message = `synaps-scope: environment entry ${entries.length} (${JSON.stringify(key)}) is refused: ${unwritable}`;
      throw new ScopeError(RESULT.INVALID_ARGUMENT, message);
    }
    entries.push(entry);
  }
  entries.push(null);
  return cArray(entries);
}

/** The strings of `argv`, checked (see argvArray). */
function argvStrings(argv) {
  if (!Array.isArray(argv)) throw new TypeError('argv must be an array of strings');
  return argv.map((arg, i) => cString(arg, `argv[${i}]`));
}

/** `argv`, NULL-terminated for the C ABI. */
function argvArray(argv) {
  return cArray([...argvStrings(argv), null]);
}

function cwdArg(cwd) {
  if (cwd === undefined || cwd === null) return null;
  if (cwd instanceof URL) return cString(require('node:url').fileURLToPath(cwd), 'cwd');
  return cString(cwd, 'cwd');
}

/** A kind by name, as the library reads it (`scope_kind_from_name`): an unknown one is INVALID_KIND. */
function kindNumber(kind) {
  const out = [0];
  check(c.kindFromName(cString(kind, 'kind'), out));
  return out[0];
}

/** A number as the C ABI's uint32_t takes it (koffi would turn 1.5 into 1 and 2^32 + N into N). */
function uint32(value, what) {
  if (typeof value !== 'number') throw new TypeError(`${what} must be a number, not ${typeof value}`);
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`${what} must be a whole number a uint32_t can hold, not ${value}`);
  }
  return value;
}

/** A process id: which numbers are pids (1 to 2^31 - 1) is the library's rule. */
function pidArg(value) {
  return uint32(value, 'pid');
}

/** A bound in milliseconds (undefined: `fallback`): that 0 is none is the library's rule. */
function timeoutMs(value, what, fallback) {
  return value === undefined ? fallback : uint32(value, what);
}

/**
 * The key of the method by which a live handle gives its pointer to the package's own modules
 * (a symbol, so it is no part of the public API).
 */
const livePointer = Symbol('synaps-scope live pointer');

/** The live pointers of `handles` (a ScopeHandle or an array of them) as a C array, and their count. */
function handlePointers(handles, what) {
  const list = Array.isArray(handles) ? handles : [handles];
  const pointers = list.map((handle, at) => {
    if (handle === null || typeof handle !== 'object' || typeof handle[livePointer] !== 'function') {
      throw new TypeError(`${what}[${at}] must be a ScopeHandle`);
    }
    return handle[livePointer]();
  });
  return { array: cPointerArray(pointers), count: pointers.length };
}

module.exports = {
  argvArray, argvStrings, cArray, cString, cwdArg, envArray, handlePointers, kindNumber, livePointer, pidArg, timeoutMs,
};
