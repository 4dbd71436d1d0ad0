'use strict';
// `ScopeLauncher`: the requests that make one (on a thread of the request's own, or blocking the
// caller), and what it wraps.

const { DEFAULT_PROBE_TIMEOUT_MS, KINDS, RESULT, SHELL_WORDS, WRAPPER_NAMES } = require('./abi.js');
const { argvArray, argvStrings, cArray, cString, cwdArg, envArray, kindNumber, timeoutMs } = require('./args.js');
const { takeWrapped } = require('./argv.js');
const { callHere, check } = require('./error.js');
const { c } = require('./library.js');
const { deliverLogLines } = require('./log.js');
const { answered, settled } = require('./queue.js');

const launcherRegistry = new FinalizationRegistry((pointer) => c.launcherFree(pointer));

/** The live pointer of a launcher, for this module's own calls. */
let pointerOf;

/**
 * Turns `program args…` into an argv that runs it in a new scope: through the project's launcher
 * program `synaps-scope-exec` (which keeps argv[0]), or systemd-run.
 */
class ScopeLauncher {
  #pointer;

  static {
    pointerOf = (launcher) => launcher.#live();
  }

  constructor(pointer, limits = {}) {
    this.#pointer = pointer;
    launcherRegistry.register(this, pointer, this);
    this.kind = c.launcherKind(pointer) === KINDS.daemon ? 'daemon' : 'tool';
    this.slice = c.launcherSlice(pointer);
    this.wrapper = WRAPPER_NAMES[c.launcherWrapper(pointer)];
    this.required = c.launcherRequired(pointer);
    this.systemdVersion = c.launcherVersion(pointer) || null;
    this.limits = Object.freeze({ ...limits });
    const unenforced = [];
    for (let at = 0; at < c.launcherUnenforcedCount(pointer); at++) unenforced.push(c.launcherUnenforced(pointer, at));
    this.unenforced = Object.freeze(unenforced);
    Object.freeze(this);
  }

  /**
   * A new launcher like this one whose launches each give their scope `limits`, systemd's names
   * and values in its own syntax: `{ MemoryMax: '2G', CPUQuota: '200%', TasksMax: 64 }`. A limit
   * that will not be enforced is warned about and listed in `unenforced`; in `required` mode it
   * throws ScopeRequiredError instead. Throws ScopeError (SCOPE_INVALID_ARGUMENT) for a bad name
   * or value. Does not block.
   */
  withLimits(limits) {
    return withLimits(limits, (pointer) => {
      const out = [null];
      const result = c.launcherWithLimits(this.#live(), pointer, out);
      deliverLogLines();
      check(result);
      return new ScopeLauncher(out[0], limits);
    });
  }

  #live() {
    if (!this.#pointer) throw new Error('synaps-scope: this launcher was closed');
    return this.#pointer;
  }

  /**
   * Rewrites argv to run in a new scope. `env` and `cwd` are the child's: the program is resolved
   * with them first. A program that cannot be resolved is left unwrapped (`unit` null). With
   * `argv0` (as child_process.spawn takes it), argv[0] is the program to run and `argv0` what it
   * sees, e.g. '-bash' for a login shell; systemd-run cannot pass an argv[0], so there the program
   * sees its own path.
   */
  wrap(argv, { env, cwd, argv0 } = {}) {
    const out = [null];
    const args = argvStrings(argv);
    let program = null;
    if (argv0 !== undefined) {
      if (args.length === 0) throw new TypeError('argv0 needs a program in argv[0]');
      program = args[0];
      args[0] = cString(argv0, 'argv0');
    }
    const result = c.wrapProgram(this.#live(), program, cArray([...args, null]), envArray(env), cwdArg(cwd), out);
    deliverLogLines();
    check(result);
    return takeWrapped(out[0]);
  }

  /**
   * A shell command in a new scope, as child_process.spawn runs one with `shell`: the shell
   * (`shell` when a string, else /bin/sh) runs `-c` with the words joined with spaces.
   */
  wrapShell(words, { env, cwd, shell } = {}) {
    const out = [null];
    const shellPath = typeof shell === 'string' ? cString(shell, 'shell') : null;
    const result = c.wrapShell(this.#live(), shellPath, argvArray(words), SHELL_WORDS.joined, envArray(env), cwdArg(cwd), out);
    deliverLogLines();
    check(result);
    return takeWrapped(out[0]);
  }

  /** Frees the launcher now (the garbage collector would otherwise). Further use throws. */
  close() {
    if (!this.#pointer) return;
    launcherRegistry.unregister(this);
    c.launcherFree(this.#pointer);
    this.#pointer = null;
  }
}

/**
 * Checks `limits` (an object of systemd property names to values) as every launch does, and hands
 * the checked native limits to `use`; throws ScopeError (SCOPE_INVALID_ARGUMENT) for a bad one.
 */
function withLimits(limits, use) {
  if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) {
    throw new TypeError('limits must be an object of property names to values');
  }
  const entries = Object.entries(limits);
  // Each scope_property is a name's and a value's pointer: the array is their strings in turn.
  const strings = entries.flatMap(([name, value]) => {
    if (typeof value !== 'string' && !Number.isInteger(value)) {
      throw new TypeError(`the value of ${name} must be a string or an integer`);
    }
    return [cString(name, 'a limit\'s name'), cString(String(value), `the value of ${name}`)];
  });
  const out = [null];
  check(c.limitsNew(entries.length ? cArray(strings) : null, entries.length, out));
  try {
    return use(out[0]);
  } finally {
    c.limitsFree(out[0]);
  }
}

/** Checks `limits` as every launch does; throws ScopeError for a bad name or value. */
function checkLimits(limits) {
  withLimits(limits, () => undefined);
}

/** `launcher` with `limits` when there are any (the launcher closed for its successor). */
function limited(launcher, limits) {
  if (!launcher || limits === undefined) return launcher;
  try {
    return launcher.withLimits(limits);
  } finally {
    launcher.close();
  }
}

function launcherArgs({ env, kind = 'tool', probeTimeoutMs, limits } = {}) {
  if (limits !== undefined) checkLimits(limits);
  return [envArray(env), kindNumber(kind), timeoutMs(probeTimeoutMs, 'probeTimeoutMs', DEFAULT_PROBE_TIMEOUT_MS)];
}

/**
 * A fresh, bounded probe of the user's systemd manager on a thread of its own (not a pool, so
 * every request settles within its own bound however many run at once). Resolves to a launcher,
 * or null to launch directly; rejects with ScopeRequiredError in `required` mode.
 */
async function launcherForEnv(options) {
  const args = launcherArgs(options);
  return answered((queue, token) => c.launcherForEnvQueued(...args, queue, token), (answer) => {
    settled(answer);
    const out = [null];
    check(c.answerTakeLauncher(answer, out));
    return limited(out[0] ? new ScopeLauncher(out[0]) : null, options?.limits);
  });
}

/** launcherForEnv on the calling thread: blocks up to the probe bound. */
function launcherForEnvSync(options) {
  const out = [null];
  try {
    callHere(c.launcherForEnv, ...launcherArgs(options), out);
  } finally {
    deliverLogLines();
  }
  return limited(out[0] ? new ScopeLauncher(out[0]) : null, options?.limits);
}

module.exports = { ScopeLauncher, checkLimits, launcherForEnv, launcherForEnvSync, pointerOf };
