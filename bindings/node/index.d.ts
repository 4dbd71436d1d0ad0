// Type declarations of synaps-scope for Node.
/// <reference types="node" />
import type { ChildProcess, SpawnOptions } from 'node:child_process';
import { EventEmitter } from 'node:events';

/** The C ABI version this package was written for; a library with another is refused at load. */
export declare const ABI_VERSION: 1;
/** The C ABI's kinds (`SCOPE_KIND_*`), by name. */
export declare const KINDS: Readonly<Record<ScopeKind, number>>;
/** SCOPE_SHELL_WORDS_*: how a shell is handed a command's words; Node's own way is `joined`. */
export declare const SHELL_WORDS: Readonly<{ positional: number; joined: number }>;
/** The C ABI's log levels (`SCOPE_LOG_LEVEL_*`), indexed by number; index 0 is unused. */
export declare const LOG_LEVELS: readonly ('' | LogLevel)[];
/** The C ABI's wrappers (`SCOPE_WRAPPER_*`), by name. */
export declare const WRAPPERS: Readonly<Record<WrapperName, number>>;
/** The exit status of a scoped child whose scope could not be made in `required` mode: the command did not run. */
export declare const EXEC_FAILED_STATUS: 125;
/** The names of the C ABI's result codes (`SCOPE_RESULT_*`), indexed by number. */
export declare const RESULT_NAMES: readonly string[];
/** SCOPE_ENDING_KIND_*, SCOPE_OOMD_RULE_* and SCOPE_EVIDENCE_* of the header, by number. */
export declare const ENDING_NAMES: readonly string[];
export declare const EVIDENCE_NAMES: readonly string[];
/** The header's SCOPE_VERDICT_* names, by number (the number is `synaps-scope doctor`'s exit status). */
export declare const VERDICT_NAMES: readonly string[];
export declare const OOMD_RULE_NAMES: readonly string[];
export declare const SURENESS_NAMES: readonly string[];
export declare const CANNOT_WARN_NAMES: readonly string[];
/** Each result's number by its name, as the header's `SCOPE_RESULT_*`. */
export declare const RESULT: Readonly<Record<string, number>>;
/** The bound of a probe when none is given, in milliseconds (the header's `SCOPE_DEFAULT_PROBE_TIMEOUT_MS`). */
export declare const DEFAULT_PROBE_TIMEOUT_MS: 3000;
/** The bound of a kill or of a wait for a scope to empty when none is given, in milliseconds. */
export declare const DEFAULT_KILL_TIMEOUT_MS: 5000;
/** The path libsynaps_scope.so was loaded from. */
export declare const libraryPath: string;
/** The library's version. */
export declare const version: string;

export type ScopeKind = 'tool' | 'daemon';
/** The program that makes the scope: the project's launcher program, or systemd-run. */
export type WrapperName = 'synaps-scope-exec' | 'systemd-run';
export type LogLevel = 'error' | 'warn' | 'info' | 'debug' | 'trace';
export type Environment = Record<string, string | undefined>;
/** An argument or path; as for child_process.spawn, strings (passed as UTF-8). */
export type Arg = string;

export interface LauncherOptions {
  /** The child's environment (default: process.env). */
  env?: Environment;
  /** Which kind of scope (default: 'tool'). */
  kind?: ScopeKind;
  /** The bound on the probe, in milliseconds (default 3000). */
  probeTimeoutMs?: number;
  /** The scope's resource limits (ScopeLauncher.withLimits), checked before the probe. */
  limits?: Limits;
}

/** A scope's resource limits: systemd's property names and values in its own syntax. */
export interface Limits {
  MemoryMax?: string | number;
  MemoryHigh?: string | number;
  MemorySwapMax?: string | number;
  CPUWeight?: string | number;
  CPUQuota?: string;
  TasksMax?: string | number;
  IOWeight?: string | number;
}

export interface WrapOptions {
  /** The child's environment, used to resolve the program (default: process.env). */
  env?: Environment;
  /** The child's working directory (default: this process's). */
  cwd?: string | URL;
  /** What the program sees as argv[0] (argv[0] is then only the program to run), as for child_process.spawn. */
  argv0?: string;
}

export interface ShellOptions {
  /** The child's environment (default: process.env). */
  env?: Environment;
  /** The child's working directory (default: this process's). */
  cwd?: string | URL;
  /** The shell to run, as child_process.spawn's `shell` option: a path, or true for /bin/sh. */
  shell?: string | boolean;
}

export interface Wrapped {
  /** The argv to spawn: synaps-scope-exec … -- /abs/program argv0 args…, systemd-run … -- /abs/program args…, or the argv unchanged. */
  argv: string[];
  /** The same arguments as the bytes the library returned. */
  argvBuffers: Buffer[];
  /** The scope's unit name; null when the program could not be resolved and was left unwrapped. */
  unit: string | null;
}

/** A failed call of the library; `code` is `SCOPE_<scope_result name>`, `result` its number. */
export declare class ScopeError extends Error {
  readonly result: number;
  readonly code: string;
}

/** `process_scopes = required`, and scopes are unavailable for this launch. */
export declare class ScopeRequiredError extends ScopeError {}
/** Why a scope cannot be warned about before systemd-oomd acts. */
export type CannotWarnKind =
  | 'no-oomd'
  | 'no-rule'
  | 'no-psi'
  | 'unreadable'
  | 'no-swap'
  | 'no-memory-controller'
  | 'scope-gone'
  | 'cannot-ask';
/** None of the scopes given can be warned about (code SCOPE_CANNOT_WARN); `kind` says why. */
export declare class CannotWarnError extends ScopeError {
  readonly kind: CannotWarnKind;
}

/** Turns `program args…` into an argv that runs it in a new scope. */
export declare class ScopeLauncher {
  private constructor();
  readonly kind: ScopeKind;
  readonly slice: string | null;
  /** Which program makes the scope. */
  readonly wrapper: WrapperName;
  /** Whether `process_scopes = required` was in force: a launch it cannot scope fails rather than running directly. */
  readonly required: boolean;
  /** The version of the systemd-run in use; null with the launcher program. */
  readonly systemdVersion: number | null;
  /** The limits each launch gives its scope. */
  readonly limits: Readonly<Limits>;
  /** The limits that will not be enforced, each in words with the reason (each was warned about). */
  readonly unenforced: readonly string[];
  /** A new launcher like this one whose launches each give their scope `limits`
   * (`{ MemoryMax: '2G', CPUQuota: '200%' }`); throws ScopeRequiredError in `required` mode for one
   * that will not be enforced, ScopeError (SCOPE_INVALID_ARGUMENT) for a bad name or value. */
  withLimits(limits: Limits): ScopeLauncher;
  wrap(argv: readonly Arg[], options?: WrapOptions): Wrapped;
  /** A shell command in a new scope, as child_process.spawn runs one with `shell`: `/bin/sh -c` (or the shell named) with the words joined with spaces. */
  wrapShell(words: readonly Arg[], options?: ShellOptions): Wrapped;
  /** Frees the launcher now rather than at garbage collection; further use throws. */
  close(): void;
}

export interface ScopeStats {
  memoryCurrent: number | null;
  memoryPeak: number | null;
  pidsCurrent: number | null;
}

/** One line of a pressure file: the share of the last 10, 60 and 300 s spent waiting (percent), and the total (µs). */
export interface PressureLine {
  avg10: number;
  avg60: number;
  avg300: number;
  totalUsec: number;
}

/** One resource's pressure: some task waited; every task did (`full`, null where not counted). */
export interface Pressure {
  some: PressureLine;
  full: PressureLine | null;
}

/** A scope's pressure stall information; null per resource where the kernel has no PSI or the scope is gone. */
export interface ScopePressure {
  memory: Pressure | null;
  cpu: Pressure | null;
  io: Pressure | null;
}

/** How a scope ended (`ScopeHandle.ending`). */
export interface ScopeEnding {
  /** 'oomd': systemd-oomd killed it; 'kernel-oom': the kernel's OOM killer killed `kernelOomKills`
   * processes in it; 'handle-kill': a scope handle's kill that found processes in it; 'unknown':
   * no evidence of a kill and no count of the kernel's. */
  kind: 'running' | 'oomd' | 'kernel-oom' | 'handle-kill' | 'on-its-own' | 'unknown';
  /** With 'oomd', the rule that acted, where oomd's signal names it or only one covers the scope. */
  oomdRule: 'swap' | 'memory-pressure' | null;
  kernelOomKills: number;
  /** What the answer rests on: 'oomd-signal' (systemd-oomd's Killed signal, which no process of the
   * user can send), 'oomd-mark', 'own-kill' (a kill through this handle), 'kill-mark',
   * 'memory-events', 'memory-events-lost', 'cgroup-events' (running) or 'none'. */
  evidence: 'cgroup-events' | 'oomd-signal' | 'oomd-mark' | 'own-kill' | 'kill-mark' | 'memory-events' | 'memory-events-lost' | 'none';
  /** Whether any process of the user could have made that evidence (a mark on the cgroup). */
  forgeable: boolean;
}

/** A running scope of this library, found by the unit name that `wrap` returned. */
export declare class ScopeHandle {
  private constructor();
  static fromPid(unit: string, pid: number): ScopeHandle;
  static ofProcess(pid: number): ScopeHandle;
  static fromManager(unit: string, options?: { env?: Environment; timeoutMs?: number }): Promise<ScopeHandle>;
  readonly unit: string;
  readonly cgroup: string;
  pids(): number[];
  stats(): ScopeStats;
  /** The scope's pressure stall information (`memory.pressure`, `cpu.pressure`, `io.pressure`). */
  pressure(): ScopePressure;
  /** Kills every process in the scope, descendants that left the process group included;
   * resolves to the pids that were in it when the kill began, once the scope is empty as the
   * kernel counts it (a killed process may still be finishing its exit, not yet a zombie, but
   * runs none of its own code again). */
  kill(options?: { timeoutMs?: number }): Promise<number[]>;
  waitEmpty(options?: { timeoutMs?: number }): Promise<void>;
  /** How the scope ended, told after the manager has collected it too (make the handle while the
   * tool runs); an oomd kill's rule is asked of the managers within `timeoutMs`. */
  ending(options?: { env?: Environment; timeoutMs?: number }): Promise<ScopeEnding>;
  /** A watch on this scope for systemd-oomd's rules (OomdWatch.create). */
  watchOomd(options?: { env?: Environment; timeoutMs?: number }): Promise<OomdWatch>;
  /** Frees the handle now (a kill, waitEmpty or ending still running works on a copy of its own); later calls throw. */
  close(): void;
}

/** systemd-oomd is on its way to kill the scope `unit`. */
export interface OomdWarning {
  readonly unit: string;
  readonly rule: 'memory-pressure' | 'swap';
  /** The unit the rule is set on. */
  readonly monitored: string;
  /** In percent: the monitored unit's memory pressure (full avg10), or the share of swap used. */
  readonly figure: number;
  /** In percent: the figure oomd acts past. */
  readonly limit: number;
  /** How long the pressure has been over its limit (0 under the swap rule). */
  readonly heldForMs: number;
  /** How long it must hold before oomd acts (0 under the swap rule). */
  readonly durationMs: number;
  /** 'possible': past the limit (within 10 points or 10 s of the swap limit) and the scope ranks first among
   * oomd's candidates; 'likely': held for half the duration with reclaim, or within 3 points. */
  readonly sure: 'possible' | 'likely';
  readonly message: string;
}

/** A scope a watch cannot warn about, and why. */
export interface CannotWarn {
  readonly unit: string;
  readonly kind: CannotWarnKind;
  readonly message: string;
}

/**
 * Watches scopes for systemd-oomd's rules; 'warning' events come on the event loop. It does not
 * hold the event loop open, and is closed when collected: keep a reference while it should warn.
 */
export declare class OomdWatch extends EventEmitter {
  private constructor();
  /** Asks the managers which rules cover each scope, on a thread of the library's own; rejects
   * with CannotWarnError where none can be warned about. */
  static create(handles: ScopeHandle | readonly ScopeHandle[], options?: { env?: Environment; timeoutMs?: number }): Promise<OomdWatch>;
  /** The units of the scopes it can warn about. */
  readonly watched: readonly string[];
  /** The scopes given that it cannot warn about. */
  readonly cannotWarn: readonly CannotWarn[];
  on(event: 'warning', listener: (warning: OomdWarning) => void): this;
  once(event: 'warning', listener: (warning: OomdWarning) => void): this;
  off(event: 'warning', listener: (warning: OomdWarning) => void): this;
  /** Stops it; resolves once no 'warning' can come any more. */
  close(): Promise<void>;
}

/** Checks limits as every launch does; throws ScopeError (SCOPE_INVALID_ARGUMENT) for a bad one. */
export declare function checkLimits(limits: Limits): void;
/** A fresh, bounded probe on a worker thread: a launcher, or null to launch directly. */
export declare function launcherForEnv(options?: LauncherOptions): Promise<ScopeLauncher | null>;
/** The same probe on the calling thread: blocks up to the bound. */
export declare function launcherForEnvSync(options?: LauncherOptions): ScopeLauncher | null;
/** The absolute path execvp in a child with `env` and `cwd` would run; throws (code ENOENT) if none. */
export declare function resolveProgram(program: Arg, options?: WrapOptions): string;

export interface ScopedChildProcess extends ChildProcess {
  /** The scope the child runs in; null for a direct launch. */
  scopeUnit: string | null;
}

export interface ScopedSpawnOptions extends SpawnOptions {
  kind?: ScopeKind;
  probeTimeoutMs?: number;
  /** The scope's resource limits (ScopeLauncher.withLimits). */
  limits?: Limits;
}

/**
 * child_process.spawn in a scope; resolves once the child is spawned. A child that switches user
 * (`uid`, `gid`) runs directly with one warning per process (a scope of this user's manager cannot
 * hold another user's process), and is refused with ScopeRequiredError in `required` mode.
 */
export declare function spawn(command: string, args?: readonly string[], options?: ScopedSpawnOptions): Promise<ScopedChildProcess>;
export declare function spawn(command: string, options?: ScopedSpawnOptions): Promise<ScopedChildProcess>;

/**
 * Where the library's log lines go (default: console.warn); null silences them. The main thread's
 * logger receives every line, also those of requests made in workers; in a worker it throws.
 */
export declare function setLogger(logger: ((level: LogLevel, message: string) => void) | null): void;
export declare function setLogLevel(level: LogLevel): void;
/**
 * For a program about to exit: waits at most `timeoutMs` (default 3000) for the background slice
 * checks still running, so that their warnings reach the logger, then logs a warning for each
 * check that got no answer. Resolves true when every check had finished.
 */
export declare function flushWarnings(timeoutMs?: number): Promise<boolean>;

/**
 * The report `synaps-scope doctor` prints, headed by the library this package loaded: which
 * launcher program it uses and how that was found, the user manager, the configuration, and
 * whether launches of each kind would run in scopes, and why not. Runs the same checks a launch
 * runs, each bounded by `timeoutMs` (default 3000), on a worker thread.
 */
export declare function doctor(options?: { env?: Environment; timeoutMs?: number }): Promise<string>;

/** What `diagnose` concludes of every kind: the worst of their outcomes. */
export type Verdict = 'scoped' | 'direct' | 'bad-input' | 'refused';

/** The report of `doctor` and its verdict, as values. */
export interface Diagnosis {
  /** The report for a person, as `doctor` returns it. */
  report: string;
  /** The verdict. */
  verdict: Verdict;
  /** The verdict for a person, as the report's last line says it. */
  words: string;
  /** The verdict's number: `synaps-scope doctor`'s exit status (0, 1, 2 or 3). */
  exitCode: number;
}

/**
 * The report `doctor` gives and its verdict as a value, so that no caller reads it out of the
 * report's text. `npx synaps-scope doctor` prints the report and exits with `exitCode`.
 */
export declare function diagnose(options?: { env?: Environment; timeoutMs?: number }): Promise<Diagnosis>;
