'use strict';
// The ABI's own facts, as the header (include/synaps_scope.h) states them: its version, the kinds,
// the shell's words, the results, log levels, endings and rules, the wrappers and the default
// bounds; a test checks them against the header.

/** The C ABI version this package was written for (SCOPE_ABI_VERSION of synaps_scope.h). */
const ABI_VERSION = 1;

// These tables and bounds mirror the header's SCOPE_KIND_*, SCOPE_SHELL_WORDS_*, SCOPE_RESULT_*, SCOPE_LOG_LEVEL_* and
// SCOPE_DEFAULT_*_MS; a test checks them against include/synaps_scope.h.
const KINDS = Object.freeze({ tool: 0, daemon: 1 });
/** SCOPE_SHELL_WORDS_*: how a shell is handed a command's words (Node's own way is `joined`). */
const SHELL_WORDS = Object.freeze({ positional: 0, joined: 1 });
const RESULT_NAMES = Object.freeze([
  'OK', 'NULL_PARAMETER', 'INVALID_ARGUMENT', 'INVALID_UTF8', 'INVALID_KIND', 'REQUIRED_UNAVAILABLE',
  'NOT_FOUND', 'NOT_OURS', 'NOT_IN_SCOPE', 'TIMED_OUT', 'MANAGER', 'NO_CGROUP2', 'IO', 'PANIC', 'CANNOT_WARN',
]);
/** Each result's number by its name: results are compared by name, never by a bare number. */
const RESULT = Object.freeze(Object.fromEntries(RESULT_NAMES.map((name, number) => [name, number])));
const LEVELS = Object.freeze(['', 'error', 'warn', 'info', 'debug', 'trace']);
// SCOPE_ENDING_KIND_*, SCOPE_OOMD_RULE_* and SCOPE_EVIDENCE_*; each name, lowercased with dashes, is
// the core's word.
const ENDING_NAMES = Object.freeze(['RUNNING', 'OOMD', 'KERNEL_OOM', 'HANDLE_KILL', 'ON_ITS_OWN', 'UNKNOWN']);
const OOMD_RULE_NAMES = Object.freeze(['UNKNOWN', 'SWAP', 'MEMORY_PRESSURE']);
const EVIDENCE_NAMES = Object.freeze([
  'NONE', 'CGROUP_EVENTS', 'OOMD_SIGNAL', 'OOMD_MARK', 'OWN_KILL', 'KILL_MARK', 'MEMORY_EVENTS', 'MEMORY_EVENTS_LOST',
]);
/** SCOPE_SURENESS_* (numbered from 1) and SCOPE_CANNOT_WARN_KIND_*: a warning before systemd-oomd acts. */
const SURENESS_NAMES = Object.freeze(['', 'POSSIBLE', 'LIKELY']);
const CANNOT_WARN_NAMES = Object.freeze([
  'NONE', 'NO_OOMD', 'NO_RULE', 'NO_PSI', 'UNREADABLE', 'NO_SWAP', 'NO_MEMORY_CONTROLLER', 'SCOPE_GONE', 'CANNOT_ASK',
]);
/** SCOPE_ANSWER_KIND_*: what an answer taken from the package's queue answers. */
const ANSWER_KINDS = Object.freeze({ none: 0, launcher: 1, handle: 2, ending: 3, pids: 4, done: 5, oomdWatch: 6, oomdWarning: 7, log: 8 });
/** SCOPE_VERDICT_*: what `diagnose` concludes, numbered as `synaps-scope doctor` exits. */
const VERDICT_NAMES = Object.freeze(['SCOPED', 'DIRECT', 'BAD_INPUT', 'REFUSED']);
const word = (name) => name.toLowerCase().replace(/_/g, '-');
const STAT_UNKNOWN = 0xffffffffffffffffn;
const DEFAULT_PROBE_TIMEOUT_MS = 3000;
const DEFAULT_KILL_TIMEOUT_MS = 5000;

/** The wrappers by their number in the C ABI (`SCOPE_WRAPPER_*`). */
const WRAPPERS = Object.freeze({ 'synaps-scope-exec': 1, 'systemd-run': 2 });
const WRAPPER_NAMES = Object.freeze({ 1: 'synaps-scope-exec', 2: 'systemd-run' });

/** The exit status of a scoped child whose scope could not be made in `required` mode: the command did not run (launcher program only). */
const EXEC_FAILED_STATUS = 125;

module.exports = {
  ABI_VERSION,
  ANSWER_KINDS,
  CANNOT_WARN_NAMES,
  DEFAULT_KILL_TIMEOUT_MS,
  DEFAULT_PROBE_TIMEOUT_MS,
  ENDING_NAMES,
  EVIDENCE_NAMES,
  EXEC_FAILED_STATUS,
  KINDS,
  LEVELS,
  OOMD_RULE_NAMES,
  RESULT,
  RESULT_NAMES,
  SHELL_WORDS,
  STAT_UNKNOWN,
  SURENESS_NAMES,
  VERDICT_NAMES,
  WRAPPERS,
  WRAPPER_NAMES,
  word,
};
