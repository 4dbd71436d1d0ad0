'use strict';
// Program resolution, as execvp in the child would find the program.
const koffi = require('koffi');

const { cString, cwdArg, envArray } = require('./args.js');
const { check } = require('./error.js');
const { c } = require('./library.js');

/** The absolute path execvp in a child with `env` and `cwd` would run; throws ENOENT when none. */
function resolveProgram(program, { env, cwd } = {}) {
  const out = [null];
  check(c.resolveProgram(cString(program, 'program'), envArray(env), cwdArg(cwd), out), undefined, { program });
  try {
    return koffi.decode(out[0], 'char', -1);
  } finally {
    c.stringFree(out[0]);
  }
}

module.exports = { resolveProgram };
