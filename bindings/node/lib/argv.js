'use strict';
// A wrapped command line (`scope_argv`), as the library hands it out.
const { c } = require('./library.js');
const { check } = require('./error.js');

/**
 * The argv of a `scope_argv` the library handed out, which this frees: the whole argv copied into
 * one Buffer of ours in one call, each argument NUL-terminated (an argument holds no NUL), so no
 * view of the library's memory outlives it and nothing is allocated outside the JS heap (a
 * koffi.view per argument left ~2 KB a wrap behind).
 */
function takeWrapped(wrapped) {
  try {
    const bytes = Buffer.alloc(Number(c.argvSize(wrapped)));
    check(c.argvCopy(wrapped, bytes, bytes.length));
    const argvBuffers = [];
    for (let start = 0; start < bytes.length; ) {
      const end = bytes.indexOf(0, start);
      argvBuffers.push(bytes.subarray(start, end));
      start = end + 1;
    }
    return { argv: argvBuffers.map((b) => b.toString('utf8')), argvBuffers, unit: c.argvUnit(wrapped) };
  } finally {
    c.argvFree(wrapped);
  }
}

module.exports = { takeWrapped };
