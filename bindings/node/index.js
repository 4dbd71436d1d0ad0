'use strict';
// synaps-scope for Node: each child process in its own systemd scope, over the library's C ABI
// (libsynaps_scope.so, loaded with koffi). Probes run on koffi's worker threads, so the event loop
// never waits on them; every string and handle the library returns is freed exactly once, by the
// library's own free functions.

const childProcess = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { promisify } = require('node:util');
const { isMainThread } = require('node:worker_threads');
const koffi = require('koffi');

/** The C ABI version this package was written for (SCOPE_ABI_VERSION of synaps_scope.h). */
const ABI_VERSION = 1;
const LIBRARY = 'libsynaps_scope.so';
/** The library's soname, as a system install (the C tarball, a distribution package) provides it. */
const SONAME = `${LIBRARY}.${ABI_VERSION}`;
/** The same library as cargo names it in a repository build (the synaps-scope-ffi crate). */
const CARGO_LIBRARY = 'libsynaps_scope_ffi.so';
// These tables and bounds mirror the header's SCOPE_KIND_*, SCOPE_SHELL_WORDS_*, SCOPE_RESULT_*, SCOPE_LOG_LEVEL_* and
// SCOPE_DEFAULT_*_MS; a test checks them against include/synaps_scope.h.
const KINDS = Object.freeze({ tool: 0, daemon: 1 });
/** SCOPE_SHELL_WORDS_*: how a shell is handed a command's words (Node's own way is `joined`). */
const SHELL_WORDS = Object.freeze({ positional: 0, joined: 1 });
const RESULT_NAMES = Object.freeze([
  'OK', 'NULL_PARAMETER', 'INVALID_ARGUMENT', 'INVALID_UTF8', 'INVALID_KIND', 'REQUIRED_UNAVAILABLE',
  'NOT_FOUND', 'NOT_OURS', 'NOT_IN_SCOPE', 'TIMED_OUT', 'MANAGER', 'NO_CGROUP2', 'IO', 'PANIC',
]);
/** Each result's number by its name: results are compared by name, never by a bare number. */
const RESULT = Object.freeze(Object.fromEntries(RESULT_NAMES.map((name, number) => [name, number])));
const LEVELS = Object.freeze(['', 'error', 'warn', 'info', 'debug', 'trace']);
// SCOPE_ENDING_KIND_* and SCOPE_OOMD_RULE_*; each name, lowercased with dashes, is the core's word.
const ENDING_NAMES = Object.freeze(['RUNNING', 'OOMD', 'KERNEL_OOM', 'HANDLE_KILL', 'ON_ITS_OWN', 'UNKNOWN']);
const OOMD_RULE_NAMES = Object.freeze(['UNKNOWN', 'SWAP', 'MEMORY_PRESSURE']);
const word = (name) => name.toLowerCase().replace(/_/g, '-');
const STAT_UNKNOWN = 0xffffffffffffffffn;
const DEFAULT_PROBE_TIMEOUT_MS = 3000;
const DEFAULT_KILL_TIMEOUT_MS = 5000;

/**
 * The places searched for the library, in order: SYNAPS_SCOPE_LIB alone when it is set; else the
 * package's own prebuilt copy (with the launcher program beside it), the cargo builds when the
 * package sits in the repository, and last the soname through the dynamic loader's own search
 * (LD_LIBRARY_PATH, /etc/ld.so.cache, the system's library directories).
 */
function candidates() {
  if (process.env.SYNAPS_SCOPE_LIB) return [{ file: process.env.SYNAPS_SCOPE_LIB }];
  const own = path.join(__dirname, 'prebuilds', `${process.platform}-${process.arch}`, LIBRARY);
  const list = [{ file: own }];
  const repository = path.resolve(__dirname, '..', '..');
  if (fs.existsSync(path.join(repository, 'Cargo.toml'))) {
    // Of the cargo builds, the newest first: a stale release build must not shadow a fresh debug one.
    const builds = ['release', 'debug']
      .map((profile) => path.join(repository, 'target', profile, CARGO_LIBRARY))
      .sort((a, b) => modified(b) - modified(a));
    list.push(...builds.map((file) => ({ file })));
  }
  list.push({ soname: SONAME });
  return list;
}

function modified(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

/**
 * The file `lib` was loaded from, as the library itself tells it (the soname where it cannot, or
 * where a library older than this package lacks scope_library_file).
 */
function loadedFile(lib, soname) {
  try {
    return lib.func('const char *scope_library_file(void)')() ?? soname;
  } catch {
    return soname;
  }
}

function loadLibrary() {
  const tried = [];
  for (const { file, soname } of candidates()) {
    if (file !== undefined && !fs.existsSync(file)) {
      tried.push(`${file} (not found)`);
      continue;
    }
    let lib;
    try {
      lib = koffi.load(file ?? soname);
    } catch (error) {
      const place = file ?? `${soname} through the dynamic loader's search`;
      tried.push(`${place} (${error.message})`);
      continue;
    }
    const libraryPath = file ?? loadedFile(lib, soname);
    const abi = lib.func('uint32_t scope_abi_version(void)')();
    if (abi !== ABI_VERSION) {
      throw new Error(
        `synaps-scope: ${libraryPath} implements C ABI version ${abi}, but this package was written for ` +
          `version ${ABI_VERSION}; install matching versions of the package and the library`,
      );
    }
    return { lib, libraryPath };
  }
  throw new Error(
    `synaps-scope: cannot find ${LIBRARY}; tried, in order:\n  ${tried.join('\n  ')}\n` +
      `Reinstall the package (its copy is prebuilt for linux-x64 only), install the C library (${SONAME}), ` +
      'or set SYNAPS_SCOPE_LIB to its path.',
  );
}

const { lib, libraryPath } = loadLibrary();

koffi.opaque('scope_launcher');
koffi.opaque('scope_argv');
koffi.opaque('scope_handle');
koffi.struct('scope_stats', { memory_current: 'uint64_t', memory_peak: 'uint64_t', pids_current: 'uint64_t' });
koffi.struct('scope_ending', { kind: 'int', rule: 'int', kernel_oom_kills: 'uint64_t' });
const LogCallback = koffi.proto('void scope_log_callback(void *userdata, uint32_t level, const char *message, size_t len)');
const LauncherReady = koffi.proto(
  'void scope_launcher_ready(void *userdata, uint32_t result, scope_launcher *launcher, const char *error)',
);

// Every symbol is bound now, so a library missing one fails at load, not mid-launch.
const c = {
  lastError: lib.func('const char *scope_last_error(void)'),
  version: lib.func('const char *scope_version(void)'),
  stringFree: lib.func('void scope_string_free(void *s)'),
  launcherForEnv: lib.func('uint32_t scope_launcher_for_env_r(const char **envp, uint32_t kind, uint32_t timeout_ms, _Out_ scope_launcher **out, void *error, size_t error_len)'),
  launcherForEnvAsync: lib.func(
    'uint32_t scope_launcher_for_env_async(const char **envp, uint32_t kind, uint32_t timeout_ms, scope_launcher_ready *ready, void *userdata)',
  ),
  launcherFree: lib.func('void scope_launcher_free(scope_launcher *launcher)'),
  launcherWrapper: lib.func('uint32_t scope_launcher_wrapper(const scope_launcher *launcher)'),
  launcherRequired: lib.func('bool scope_launcher_required(const scope_launcher *launcher)'),
  launcherKind: lib.func('uint32_t scope_launcher_kind(const scope_launcher *launcher)'),
  launcherSlice: lib.func('const char *scope_launcher_slice(const scope_launcher *launcher)'),
  launcherVersion: lib.func('uint32_t scope_launcher_systemd_version(const scope_launcher *launcher)'),
  wrapProgram: lib.func(
    'uint32_t scope_wrap_program(const scope_launcher *launcher, const char *program, const char **argv, const char **envp, const char *cwd, _Out_ scope_argv **out)',
  ),
  wrapShell: lib.func(
    'uint32_t scope_wrap_shell(const scope_launcher *launcher, const char *shell, const char **words, uint32_t how, const char **envp, const char *cwd, _Out_ scope_argv **out)',
  ),
  argvUnit: lib.func('const char *scope_argv_unit(const scope_argv *argv)'),
  argvSize: lib.func('size_t scope_argv_size(const scope_argv *argv)'),
  argvCopy: lib.func('uint32_t scope_argv_copy(const scope_argv *argv, uint8_t *buffer, size_t buffer_len)'),
  argvFree: lib.func('void scope_argv_free(scope_argv *argv)'),
  launcherUserSwitch: lib.func('uint32_t scope_launcher_user_switch(const scope_launcher *launcher, const char *switches)'),
  resolveProgram: lib.func('uint32_t scope_resolve_program(const char *program, const char **envp, const char *cwd, _Out_ void **out)'),
  handleFromPid: lib.func('uint32_t scope_handle_from_pid(const char *unit, uint32_t pid, _Out_ scope_handle **out)'),
  handleOfProcess: lib.func('uint32_t scope_handle_of_process(uint32_t pid, _Out_ scope_handle **out)'),
  handleFromManager: lib.func('uint32_t scope_handle_from_manager_r(const char *unit, const char **envp, uint32_t timeout_ms, _Out_ scope_handle **out, void *error, size_t error_len)'),
  handleUnit: lib.func('const char *scope_handle_unit(const scope_handle *handle)'),
  handleCgroup: lib.func('const char *scope_handle_cgroup(const scope_handle *handle)'),
  handlePids: lib.func('uint32_t scope_handle_pids(const scope_handle *handle, _Out_ void **pids, _Out_ size_t *len)'),
  pidsFree: lib.func('void scope_pids_free(void *pids, size_t len)'),
  handleStats: lib.func('uint32_t scope_handle_stats(const scope_handle *handle, _Out_ scope_stats *out)'),
  handleKillPids: lib.func(
    'uint32_t scope_handle_kill_pids_r(const scope_handle *handle, uint32_t timeout_ms, _Out_ void **pids, _Out_ size_t *len, void *error, size_t error_len)',
  ),
  handleWaitEmpty: lib.func('uint32_t scope_handle_wait_empty_r(const scope_handle *handle, uint32_t timeout_ms, void *error, size_t error_len)'),
  handleEnding: lib.func(
    'uint32_t scope_handle_ending(const scope_handle *handle, const char **envp, uint32_t timeout_ms, _Out_ scope_ending *out)',
  ),
  handleFree: lib.func('void scope_handle_free(scope_handle *handle)'),
  setLogCallback: lib.func('void scope_set_log_callback(scope_log_callback *callback, void *userdata)'),
  setLogLevel: lib.func('uint32_t scope_set_log_level(uint32_t level)'),
  flushWarnings: lib.func('uint32_t scope_flush_warnings(uint32_t timeout_ms)'),
  abiVersion: lib.func('uint32_t scope_abi_version(void)'),
  doctor: lib.func('uint32_t scope_doctor_r(const char **envp, uint32_t timeout_ms, _Out_ void **out, void *error, size_t error_len)'),
};

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

/** The error for a failed `result`; the message is `detail`, or the calling thread's last error. */
function failure(result, detail) {
  const message = `synaps-scope: ${detail ?? c.lastError()}`;
  return result === RESULT.REQUIRED_UNAVAILABLE ? new ScopeRequiredError(result, message) : new ScopeError(result, message);
}

/** Throws for a failed `result`. */
function check(result, detail) {
  if (result !== RESULT.OK) throw failure(result, detail);
}

const ERROR_BUFFER = 1024;

/**
 * Calls one of the library's `_r` functions on a koffi worker thread, so the event loop never
 * waits on it; the worker's last error comes back through the trailing buffer arguments.
 */
async function callBlocking(fn, ...args) {
  const error = Buffer.alloc(ERROR_BUFFER);
  const result = await promisify(fn.async)(...args, error, ERROR_BUFFER);
  check(result, error.subarray(0, error.indexOf(0)).toString('utf8'));
}

/** The numbers of a `scope_pids` array the library returned, which is freed here. */
function takePids(array, length) {
  const count = Number(length);
  if (count === 0) return [];
  try {
    return Array.from(koffi.decode(array, 'uint32_t', count));
  } finally {
    c.pidsFree(array, count);
  }
}

/** The same `_r` function, on this thread. */
function callHere(fn, ...args) {
  check(fn(...args, null, 0));
}

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

/**
 * The report `synaps-scope doctor` prints: which library and launcher program this package uses and
 * how they were found, the user manager, the configuration, and whether launches of each kind would
 * run in scopes, and why not. Runs the same checks a launch runs, each bounded by `timeoutMs`
 * (default 3000), on a worker thread. `npx synaps-scope doctor` prints it.
 */
async function doctor({ env, timeoutMs: ms } = {}) {
  const out = [null];
  await callBlocking(c.doctor, envArray(env), timeoutMs(ms, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS), out);
  try {
    return `library:       ${libraryPath}\n${koffi.decode(out[0], 'char', -1)}`;
  } finally {
    c.stringFree(out[0]);
  }
}

/** The most detailed level delivered: 'error', 'warn' (the default), 'info', 'debug' or 'trace'. */
function setLogLevel(level) {
  const number = LEVELS.indexOf(level);
  if (number < 1) throw new TypeError(`unknown log level ${JSON.stringify(level)}`);
  check(c.setLogLevel(number));
}

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

const launcherRegistry = new FinalizationRegistry((pointer) => c.launcherFree(pointer));
const handleRegistry = new FinalizationRegistry((pointer) => c.handleFree(pointer));

/** The wrappers by their number in the C ABI (`SCOPE_WRAPPER_*`). */
const WRAPPERS = Object.freeze({ 'synaps-scope-exec': 1, 'systemd-run': 2 });
const WRAPPER_NAMES = Object.freeze({ 1: 'synaps-scope-exec', 2: 'systemd-run' });

/**
 * Turns `program args…` into an argv that runs it in a new scope: through the project's launcher
 * program `synaps-scope-exec` (which keeps argv[0]), or systemd-run.
 */
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

/** The live pointer of a launcher, for this module's own calls. */
let pointerOf;

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
  return new Promise((resolve, reject) => {
    // Holds the event loop open until the request's thread has answered (it always does, within
    // the bound; the margin only covers a machine too loaded to schedule it).
    const keepAlive = setTimeout(() => {}, args[2] + 60_000);
    const ready = koffi.register((_userdata, result, pointer, error) => {
      clearTimeout(keepAlive);
      setImmediate(() => koffi.unregister(ready));
      if (result === RESULT.OK) resolve(pointer ? new ScopeLauncher(pointer) : null);
      else reject(failure(result, error ?? 'the request failed'));
    }, koffi.pointer(LauncherReady));
    const started = c.launcherForEnvAsync(...args, ready, null);
    if (started !== 0) {
      clearTimeout(keepAlive);
      koffi.unregister(ready);
      reject(failure(started));
    }
  });
}

/** launcherForEnv on the calling thread: blocks up to the probe bound. */
function launcherForEnvSync(options) {
  const out = [null];
  callHere(c.launcherForEnv, ...launcherArgs(options), out);
  return out[0] ? new ScopeLauncher(out[0]) : null;
}

/** The absolute path execvp in a child with `env` and `cwd` would run; throws ENOENT when none. */
function resolveProgram(program, { env, cwd } = {}) {
  const out = [null];
  const result = c.resolveProgram(cString(program, 'program'), envArray(env), cwdArg(cwd), out);
  if (result === RESULT.NOT_FOUND) {
    const error = new Error(`synaps-scope: ${c.lastError()}`);
    error.code = 'ENOENT';
    throw error;
  }
  check(result);
  try {
    return koffi.decode(out[0], 'char', -1);
  } finally {
    c.stringFree(out[0]);
  }
}

/** A running scope of this library, found by the unit name `wrap` returned. */
class ScopeHandle {
  #pointer;
  /** Calls running on a worker thread with the pointer: close() leaves the freeing to the last. */
  #inFlight = 0;
  #closed = false;

  constructor(pointer) {
    this.#pointer = pointer;
    handleRegistry.register(this, pointer, this);
    this.unit = c.handleUnit(pointer);
    this.cgroup = c.handleCgroup(pointer);
    Object.freeze(this);
  }

  static fromPid(unit, pid) {
    const out = [null];
    check(c.handleFromPid(cString(unit, 'unit'), pidArg(pid), out));
    return new ScopeHandle(out[0]);
  }

  static ofProcess(pid) {
    const out = [null];
    check(c.handleOfProcess(pidArg(pid), out));
    return new ScopeHandle(out[0]);
  }

  /** Asks the user manager (on a worker thread) for the scope's cgroup. */
  static async fromManager(unit, { env, timeoutMs: ms } = {}) {
    const out = [null];
    const timeout = timeoutMs(ms, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS);
    await callBlocking(c.handleFromManager, cString(unit, 'unit'), envArray(env), timeout, out);
    return new ScopeHandle(out[0]);
  }

  #live() {
    if (this.#closed) throw new Error('synaps-scope: this scope handle was closed');
    return this.#pointer;
  }

  /** `fn(pointer, ...args)` on a worker thread; the handle is not freed while it runs. */
  async #blocking(fn, ...args) {
    await this.#whileLive((pointer) => callBlocking(fn, pointer, ...args));
  }

  /** Awaits `call(pointer)`; the handle is not freed while it runs. */
  async #whileLive(call) {
    const pointer = this.#live();
    this.#inFlight += 1;
    try {
      await call(pointer);
    } finally {
      this.#inFlight -= 1;
      if (this.#closed && this.#inFlight === 0) this.#free();
    }
  }

  pids() {
    const pids = [null];
    const len = [0];
    check(c.handlePids(this.#live(), pids, len));
    return takePids(pids[0], len[0]);
  }

  /** Usage figures; null where the kernel's controller is not enabled. */
  stats() {
    const out = {};
    check(c.handleStats(this.#live(), out));
    const known = (v) => (BigInt(v) === STAT_UNKNOWN ? null : Number(v));
    return { memoryCurrent: known(out.memory_current), memoryPeak: known(out.memory_peak), pidsCurrent: known(out.pids_current) };
  }

  /** Kills every process in the scope, descendants that left the process group included; resolves
   * to the pids that were in it when the kill began. */
  async kill({ timeoutMs: ms } = {}) {
    const pids = [null];
    const len = [0];
    await this.#blocking(c.handleKillPids, timeoutMs(ms, 'timeoutMs', DEFAULT_KILL_TIMEOUT_MS), pids, len);
    return takePids(pids[0], len[0]);
  }

  async waitEmpty({ timeoutMs: ms } = {}) {
    await this.#blocking(c.handleWaitEmpty, timeoutMs(ms, 'timeoutMs', DEFAULT_KILL_TIMEOUT_MS));
  }

  /**
   * How the scope ended, answered after the manager has collected it too, from what this handle
   * kept since it was made (so make the handle while the tool runs): `kind` is 'running', 'oomd',
   * 'kernel-oom', 'handle-kill', 'on-its-own' or 'unknown'; `oomdRule` 'swap' or
   * 'memory-pressure' where only one rule covers the scope. On a worker thread: an oomd kill's rule
   * is asked of the user and system managers within `timeoutMs`.
   */
  async ending({ env, timeoutMs: ms } = {}) {
    const envp = envArray(env);
    const timeout = timeoutMs(ms, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS);
    const out = {};
    await this.#whileLive(async (pointer) => check(await promisify(c.handleEnding.async)(pointer, envp, timeout, out)));
    const rule = OOMD_RULE_NAMES[out.rule];
    return {
      kind: word(ENDING_NAMES[out.kind] ?? 'UNKNOWN'),
      oomdRule: rule && rule !== 'UNKNOWN' ? word(rule) : null,
      kernelOomKills: Number(out.kernel_oom_kills),
    };
  }

  /** Frees the handle now, or when the last kill or waitEmpty still running settles. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    handleRegistry.unregister(this);
    if (this.#inFlight === 0) this.#free();
  }

  #free() {
    c.handleFree(this.#pointer);
    this.#pointer = null;
  }
}

/**
 * `launcher`, or null for a child that switches user (`uid`, `gid`), by the library's rule
 * (`scope_launcher_user_switch`): such a child runs directly, with one warning per process saying
 * why; in `required` mode it is refused with ScopeRequiredError before anything is spawned.
 */
function unlessUserSwitch(launcher, { uid, gid }) {
  const switches = [['uid', uid], ['gid', gid]].filter(([, value]) => value !== undefined).map(([name, value]) => `${name}=${value}`);
  if (!launcher || switches.length === 0) return launcher;
  try {
    check(c.launcherUserSwitch(pointerOf(launcher), switches.join(', ')));
  } finally {
    launcher.close();
  }
  return null;
}

/**
 * child_process.spawn in a scope: resolves to the ChildProcess, with `scopeUnit` naming its scope
 * (null for a direct launch). `shell: true` runs `/bin/sh -c` inside the scope.
 */
async function spawn(command, args = [], options = {}) {
  if (!Array.isArray(args)) {
    options = args ?? {};
    args = [];
  }
  const { kind, probeTimeoutMs, ...spawnOptions } = options;
  const launcher = unlessUserSwitch(await launcherForEnv({ env: spawnOptions.env, kind, probeTimeoutMs }), spawnOptions);
  let argv = [command, ...args];
  let unit = null;
  if (launcher) {
    const { argv0 } = spawnOptions;
    try {
      if (spawnOptions.shell) {
        ({ argv, unit } = launcher.wrapShell(argv, { env: spawnOptions.env, cwd: spawnOptions.cwd, shell: spawnOptions.shell }));
        spawnOptions.shell = false;
      } else {
        ({ argv, unit } = launcher.wrap(argv, { env: spawnOptions.env, cwd: spawnOptions.cwd, argv0 }));
      }
    } finally {
      launcher.close();
    }
    // The spawned program is the wrapper; the command's argv[0] travels in the wrapped argv.
    delete spawnOptions.argv0;
  }
  const child = childProcess.spawn(argv[0], argv.slice(1), spawnOptions);
  child.scopeUnit = unit;
  return child;
}

/** The exit status of a scoped child whose scope could not be made in `required` mode: the command did not run (launcher program only). */
const EXEC_FAILED_STATUS = 125;

module.exports = {
  ABI_VERSION,
  DEFAULT_KILL_TIMEOUT_MS,
  DEFAULT_PROBE_TIMEOUT_MS,
  EXEC_FAILED_STATUS,
  WRAPPERS,
  KINDS,
  SHELL_WORDS,
  LOG_LEVELS: LEVELS,
  ENDING_NAMES,
  OOMD_RULE_NAMES,
  RESULT,
  RESULT_NAMES,
  ScopeError,
  ScopeHandle,
  ScopeLauncher,
  ScopeRequiredError,
  doctor,
  flushWarnings,
  launcherForEnv,
  launcherForEnvSync,
  libraryPath,
  resolveProgram,
  setLogLevel,
  setLogger,
  spawn,
  version: c.version(),
};
