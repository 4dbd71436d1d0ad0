'use strict';
// Finding and loading the library (libsynaps_scope.so, with koffi), checking its ABI version, and
// binding every symbol this package calls.
const fs = require('node:fs');
const path = require('node:path');
const koffi = require('koffi');

const { ABI_VERSION } = require('./abi.js');

/** The package's own directory (this file is in its lib/). */
const PACKAGE = path.join(__dirname, '..');
const LIBRARY = 'libsynaps_scope.so';
/** The library's soname, as a system install (the C tarball, a distribution package) provides it. */
const SONAME = `${LIBRARY}.${ABI_VERSION}`;
/** The same library as cargo names it in a repository build (the synaps-scope-ffi crate). */
const CARGO_LIBRARY = 'libsynaps_scope_ffi.so';

/**
 * The places searched for the library, in order: SYNAPS_SCOPE_LIB alone when it is set; else the
 * package's own prebuilt copy (with the launcher program beside it), the cargo builds when the
 * package sits in the repository, and last the soname through the dynamic loader's own search
 * (LD_LIBRARY_PATH, /etc/ld.so.cache, the system's library directories).
 */
function candidates() {
  if (process.env.SYNAPS_SCOPE_LIB) return [{ file: process.env.SYNAPS_SCOPE_LIB }];
  const own = path.join(PACKAGE, 'prebuilds', `${process.platform}-${process.arch}`, LIBRARY);
  const list = [{ file: own }];
  const repository = path.resolve(PACKAGE, '..', '..');
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
koffi.opaque('scope_limits');
koffi.struct('scope_pressure_line', { avg10: 'double', avg60: 'double', avg300: 'double', total_usec: 'uint64_t' });
koffi.struct('scope_pressure', { has_some: 'bool', has_full: 'bool', some: 'scope_pressure_line', full: 'scope_pressure_line' });
koffi.struct('scope_pressures', { memory: 'scope_pressure', cpu: 'scope_pressure', io: 'scope_pressure' });
koffi.struct('scope_property', { name: 'const char *', value: 'const char *' });
koffi.struct('scope_stats', { memory_current: 'uint64_t', memory_peak: 'uint64_t', pids_current: 'uint64_t' });
koffi.struct('scope_ending', { kind: 'int', rule: 'int', kernel_oom_kills: 'uint64_t', evidence: 'int', forgeable: 'bool' });
koffi.opaque('scope_oomd_watch');
koffi.struct('scope_oomd_warning', {
  unit: 'const char *', rule: 'int', monitored: 'const char *', figure: 'double', limit: 'double',
  held_for_usec: 'uint64_t', duration_usec: 'uint64_t', sure: 'int', message: 'const char *',
});
koffi.struct('scope_cannot_warn', { unit: 'const char *', kind: 'int', message: 'const char *' });
koffi.opaque('scope_queue');
koffi.opaque('scope_answer');

// Every symbol is bound now, so a library missing one fails at load, not mid-launch.
const c = {
  lastError: lib.func('const char *scope_last_error(void)'),
  version: lib.func('const char *scope_version(void)'),
  stringFree: lib.func('void scope_string_free(void *s)'),
  launcherForEnv: lib.func('uint32_t scope_launcher_for_env_r(const char **envp, uint32_t kind, uint32_t timeout_ms, _Out_ scope_launcher **out, void *error, size_t error_len)'),
  launcherForEnvQueued: lib.func(
    'uint32_t scope_launcher_for_env_queued(const char **envp, uint32_t kind, uint32_t timeout_ms, const scope_queue *queue, uint64_t token)',
  ),
  launcherFree: lib.func('void scope_launcher_free(scope_launcher *launcher)'),
  launcherWrapper: lib.func('uint32_t scope_launcher_wrapper(const scope_launcher *launcher)'),
  launcherRequired: lib.func('bool scope_launcher_required(const scope_launcher *launcher)'),
  launcherKind: lib.func('uint32_t scope_launcher_kind(const scope_launcher *launcher)'),
  kindFromName: lib.func('uint32_t scope_kind_from_name(const char *name, _Out_ uint32_t *out)'),
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
  limitsNew: lib.func('uint32_t scope_limits_new(const scope_property *properties, size_t len, _Out_ scope_limits **out)'),
  limitsFree: lib.func('void scope_limits_free(scope_limits *limits)'),
  launcherWithLimits: lib.func('uint32_t scope_launcher_with_limits(const scope_launcher *launcher, const scope_limits *limits, _Out_ scope_launcher **out)'),
  launcherUnenforcedCount: lib.func('size_t scope_launcher_unenforced_count(const scope_launcher *launcher)'),
  launcherUnenforced: lib.func('const char *scope_launcher_unenforced(const scope_launcher *launcher, size_t index)'),
  launcherUserSwitch: lib.func('uint32_t scope_launcher_user_switch(const scope_launcher *launcher, const char *switches)'),
  resolveProgram: lib.func('uint32_t scope_resolve_program(const char *program, const char **envp, const char *cwd, _Out_ void **out)'),
  handleFromPid: lib.func('uint32_t scope_handle_from_pid(const char *unit, uint32_t pid, _Out_ scope_handle **out)'),
  handleOfProcess: lib.func('uint32_t scope_handle_of_process(uint32_t pid, _Out_ scope_handle **out)'),
  handleFromManagerQueued: lib.func(
    'uint32_t scope_handle_from_manager_queued(const char *unit, const char **envp, uint32_t timeout_ms, const scope_queue *queue, uint64_t token)',
  ),
  handleUnit: lib.func('const char *scope_handle_unit(const scope_handle *handle)'),
  handleCgroup: lib.func('const char *scope_handle_cgroup(const scope_handle *handle)'),
  handlePids: lib.func('uint32_t scope_handle_pids(const scope_handle *handle, _Out_ void **pids, _Out_ size_t *len)'),
  pidsFree: lib.func('void scope_pids_free(void *pids, size_t len)'),
  handleStats: lib.func('uint32_t scope_handle_stats(const scope_handle *handle, _Out_ scope_stats *out)'),
  handlePressure: lib.func('uint32_t scope_handle_pressure(const scope_handle *handle, _Out_ scope_pressures *out)'),
  handleEndingQueued: lib.func(
    'uint32_t scope_handle_ending_queued(const scope_handle *handle, const char **envp, uint32_t timeout_ms, const scope_queue *queue, uint64_t token)',
  ),
  handleKillQueued: lib.func('uint32_t scope_handle_kill_queued(const scope_handle *handle, uint32_t timeout_ms, const scope_queue *queue, uint64_t token)'),
  handleWaitEmptyQueued: lib.func(
    'uint32_t scope_handle_wait_empty_queued(const scope_handle *handle, uint32_t timeout_ms, const scope_queue *queue, uint64_t token)',
  ),
  handleFree: lib.func('void scope_handle_free(scope_handle *handle)'),
  oomdWatchNewQueued: lib.func(
    'uint32_t scope_oomd_watch_new_queued(const scope_handle **handles, size_t count, const char **envp, uint32_t timeout_ms, const scope_queue *queue, uint64_t token)',
  ),
  oomdWatchWatchedCount: lib.func('size_t scope_oomd_watch_watched_count(const scope_oomd_watch *watch)'),
  oomdWatchWatched: lib.func('const char *scope_oomd_watch_watched(const scope_oomd_watch *watch, size_t index)'),
  oomdWatchCannotCount: lib.func('size_t scope_oomd_watch_cannot_count(const scope_oomd_watch *watch)'),
  oomdWatchCannot: lib.func('uint32_t scope_oomd_watch_cannot(const scope_oomd_watch *watch, size_t index, _Out_ scope_cannot_warn *out)'),
  oomdWatchFree: lib.func('void scope_oomd_watch_free(scope_oomd_watch *watch)'),
  setLogQueue: lib.func('uint32_t scope_set_log_queue(const scope_queue *queue, uint64_t token)'),
  // The descriptor as a uint32_t (it is never negative when written): koffi reads an `int *`
  // out-parameter's array as a string's, which a worker's termination can leave unread.
  queueNew: lib.func('uint32_t scope_queue_new(_Out_ uint32_t *reader, _Out_ scope_queue **out)'),
  queueTake: lib.func('uint32_t scope_queue_take(const scope_queue *queue, _Out_ scope_answer **out)'),
  queueFree: lib.func('void scope_queue_free(scope_queue *queue)'),
  answerToken: lib.func('uint64_t scope_answer_token(const scope_answer *answer)'),
  answerKindOf: lib.func('uint32_t scope_answer_kind_of(const scope_answer *answer)'),
  answerResult: lib.func('uint32_t scope_answer_result(const scope_answer *answer)'),
  answerError: lib.func('const char *scope_answer_error(const scope_answer *answer)'),
  answerTakeLauncher: lib.func('uint32_t scope_answer_take_launcher(scope_answer *answer, _Out_ scope_launcher **out)'),
  answerTakeHandle: lib.func('uint32_t scope_answer_take_handle(scope_answer *answer, _Out_ scope_handle **out)'),
  answerTakeOomdWatch: lib.func('uint32_t scope_answer_take_oomd_watch(scope_answer *answer, _Out_ scope_oomd_watch **out)'),
  answerCannotWarnKind: lib.func('uint32_t scope_answer_cannot_warn_kind(const scope_answer *answer)'),
  answerEnding: lib.func('const scope_ending *scope_answer_ending(const scope_answer *answer)'),
  answerPids: lib.func('const uint32_t *scope_answer_pids(const scope_answer *answer, _Out_ size_t *len)'),
  answerOomdWarning: lib.func('const scope_oomd_warning *scope_answer_oomd_warning(const scope_answer *answer)'),
  answerLogLine: lib.func('const char *scope_answer_log_line(const scope_answer *answer, _Out_ uint32_t *level)'),
  answerFree: lib.func('void scope_answer_free(scope_answer *answer)'),
  setLogLevel: lib.func('uint32_t scope_set_log_level(uint32_t level)'),
  flushWarnings: lib.func('uint32_t scope_flush_warnings(uint32_t timeout_ms)'),
  abiVersion: lib.func('uint32_t scope_abi_version(void)'),
  diagnose: lib.func(
    'uint32_t scope_diagnose_r(const char **envp, uint32_t timeout_ms, _Out_ void **out, _Out_ uint32_t *verdict, void *error, size_t error_len)',
  ),
  verdictWords: lib.func('const char *scope_verdict_words(uint32_t verdict)'),
};

module.exports = { c, libraryPath };
