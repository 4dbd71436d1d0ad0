'use strict';
// synaps-scope for Node: each child process in its own systemd scope, over the library's C ABI
// (libsynaps_scope.so, loaded with koffi). launcherForEnv's probe and a scope handle's waits (kill,
// waitEmpty, ending) run on threads of the library's own, one per request, so neither the event
// loop nor libuv's shared pool waits on them; the other calls that may block, each within its
// bound (fromManager, diagnose, flushWarnings), on koffi's worker threads. Every string and handle
// the library returns is freed exactly once, by the library's own free functions.
//
// One module per concept under lib/, as the C ABI crate lays its own out (crates/ffi/src):
// launcher, argv, handle, oomd_watch, resolve, doctor, log, error (the one map of result codes to errors),
// args, abi (the header's tables) and library (loading it).

const abi = require('./lib/abi.js');
const { diagnose, doctor } = require('./lib/doctor.js');
const { ScopeError, ScopeRequiredError } = require('./lib/error.js');
const { ScopeHandle } = require('./lib/handle.js');
const { ScopeLauncher, checkLimits, launcherForEnv, launcherForEnvSync } = require('./lib/launcher.js');
const { c, libraryPath } = require('./lib/library.js');
const { flushWarnings, setLogLevel, setLogger } = require('./lib/log.js');
const { CannotWarnError, OomdWatch } = require('./lib/oomd_watch.js');
const { resolveProgram } = require('./lib/resolve.js');
const { spawn } = require('./lib/spawn.js');

module.exports = {
  ABI_VERSION: abi.ABI_VERSION,
  DEFAULT_KILL_TIMEOUT_MS: abi.DEFAULT_KILL_TIMEOUT_MS,
  DEFAULT_PROBE_TIMEOUT_MS: abi.DEFAULT_PROBE_TIMEOUT_MS,
  EXEC_FAILED_STATUS: abi.EXEC_FAILED_STATUS,
  WRAPPERS: abi.WRAPPERS,
  KINDS: abi.KINDS,
  SHELL_WORDS: abi.SHELL_WORDS,
  LOG_LEVELS: abi.LEVELS,
  ENDING_NAMES: abi.ENDING_NAMES,
  EVIDENCE_NAMES: abi.EVIDENCE_NAMES,
  OOMD_RULE_NAMES: abi.OOMD_RULE_NAMES,
  RESULT: abi.RESULT,
  RESULT_NAMES: abi.RESULT_NAMES,
  VERDICT_NAMES: abi.VERDICT_NAMES,
  CANNOT_WARN_NAMES: abi.CANNOT_WARN_NAMES,
  SURENESS_NAMES: abi.SURENESS_NAMES,
  CannotWarnError,
  OomdWatch,
  ScopeError,
  ScopeHandle,
  ScopeLauncher,
  ScopeRequiredError,
  checkLimits,
  diagnose,
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
