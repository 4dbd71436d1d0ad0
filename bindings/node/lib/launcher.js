'use strict';
// `ScopeLauncher`: the requests that make one (on a thread of the request's own, or blocking the
// caller), and what it wraps.

const { DEFAULT_PROBE_TIMEOUT_MS, KINDS, RESULT, SHELL_WORDS, WRAPPER_NAMES } = require('./abi.js');
const { argvArray, cString, cwdArg, envArray, kindNumber, timeoutMs } = require('./args.js');
const { takeWrapped } = require('./argv.js');
const { callHere, check, failure } = require('./error.js');
const { c, LauncherReady } = require('./library.js');
const { answeredOnOwnThread } = require('./own_thread.js');

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

  constructor(pointer) {
    this.#pointer = pointer;
    launcherRegistry.register(this, pointer, this);
    this.kind = c.launcherKind(pointer) === KINDS.daemon ? 'daemon' : 'tool';
    this.slice = c.launcherSlice(pointer);
    this.wrapper = WRAPPER_NAMES[c.launcherWrapper(pointer)];
    this.required = c.launcherRequired(pointer);
    this.systemdVersion = c.launcherVersion(pointer) || null;
    Object.freeze(this);
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
    const args = argvArray(argv);
    let program = null;
    if (argv0 !== undefined) {
      program = args[0];
      if (program === null) throw new TypeError('argv0 needs a program in argv[0]');
      args[0] = cString(argv0, 'argv0');
    }
    check(c.wrapProgram(this.#live(), program, args, envArray(env), cwdArg(cwd), out));
    return takeWrapped(out[0]);
  }

  /**
   * A shell command in a new scope, as child_process.spawn runs one with `shell`: the shell
   * (`shell` when a string, else /bin/sh) runs `-c` with the words joined with spaces.
   */
  wrapShell(words, { env, cwd, shell } = {}) {
    const out = [null];
    const shellPath = typeof shell === 'string' ? cString(shell, 'shell') : null;
    check(c.wrapShell(this.#live(), shellPath, argvArray(words), SHELL_WORDS.joined, envArray(env), cwdArg(cwd), out));
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

function launcherArgs({ env, kind = 'tool', probeTimeoutMs } = {}) {
  return [envArray(env), kindNumber(kind), timeoutMs(probeTimeoutMs, 'probeTimeoutMs', DEFAULT_PROBE_TIMEOUT_MS)];
}

/**
 * A fresh, bounded probe of the user's systemd manager on a thread of its own (not a pool, so
 * every request settles within its own bound however many run at once). Resolves to a launcher,
 * or null to launch directly; rejects with ScopeRequiredError in `required` mode.
 */
async function launcherForEnv(options) {
  const args = launcherArgs(options);
  return answeredOnOwnThread(LauncherReady, args[2], (ready) => c.launcherForEnvAsync(...args, ready, null), (_userdata, result, pointer, error) => {
    if (result !== RESULT.OK) throw failure(result, error ?? 'the request failed');
    return pointer ? new ScopeLauncher(pointer) : null;
  });
}

/** launcherForEnv on the calling thread: blocks up to the probe bound. */
function launcherForEnvSync(options) {
  const out = [null];
  callHere(c.launcherForEnv, ...launcherArgs(options), out);
  return out[0] ? new ScopeLauncher(out[0]) : null;
}

module.exports = { ScopeLauncher, launcherForEnv, launcherForEnvSync, pointerOf };
