'use strict';
// `ScopeHandle`: a running scope of this library, its processes, usage and ending.
const koffi = require('koffi');

const { DEFAULT_KILL_TIMEOUT_MS, DEFAULT_PROBE_TIMEOUT_MS, ENDING_NAMES, EVIDENCE_NAMES, OOMD_RULE_NAMES, STAT_UNKNOWN, word } = require('./abi.js');
const { cString, envArray, livePointer, pidArg, timeoutMs } = require('./args.js');
const { check } = require('./error.js');
const { c } = require('./library.js');
const { OomdWatch } = require('./oomd_watch.js');
const { answered, settled } = require('./queue.js');

const handleRegistry = new FinalizationRegistry((pointer) => c.handleFree(pointer));

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

/** A running scope of this library, found by the unit name `wrap` returned. */
class ScopeHandle {
  #pointer;
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

  /** Asks the user manager, on a thread of the library's own, for the scope's cgroup. */
  static async fromManager(unit, { env, timeoutMs: ms } = {}) {
    const args = [cString(unit, 'unit'), envArray(env), timeoutMs(ms, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS)];
    return answered((queue, token) => c.handleFromManagerQueued(...args, queue, token), (answer) => {
      settled(answer);
      const out = [null];
      check(c.answerTakeHandle(answer, out));
      return new ScopeHandle(out[0]);
    });
  }

  #live() {
    if (this.#closed) throw new Error('synaps-scope: this scope handle was closed');
    return this.#pointer;
  }

  /** The pointer, for the package's own modules (a watch takes it). */
  [livePointer]() {
    return this.#live();
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

  /**
   * The scope's pressure stall information, per resource (memory, cpu, io): null where the kernel
   * has no PSI or the scope is gone, else `{some, full}`, each `{avg10, avg60, avg300, totalUsec}`
   * (`full` null where the kernel does not count it).
   */
  pressure() {
    const out = {};
    check(c.handlePressure(this.#live(), out));
    const line = (l) => ({ avg10: l.avg10, avg60: l.avg60, avg300: l.avg300, totalUsec: Number(l.total_usec) });
    const resource = (p) => (p.has_some ? { some: line(p.some), full: p.has_full ? line(p.full) : null } : null);
    return { memory: resource(out.memory), cpu: resource(out.cpu), io: resource(out.io) };
  }

  /** Kills every process in the scope, descendants that left the process group included; resolves
   * to the pids that were in it when the kill began. Waits on a thread of the library's own. */
  async kill({ timeoutMs: ms } = {}) {
    const timeout = timeoutMs(ms, 'timeoutMs', DEFAULT_KILL_TIMEOUT_MS);
    const pointer = this.#live();
    return answered((queue, token) => c.handleKillQueued(pointer, timeout, queue, token), (answer) => {
      settled(answer);
      const len = [0];
      const pids = c.answerPids(answer, len);
      const count = Number(len[0]);
      return count === 0 ? [] : Array.from(koffi.decode(pids, 'uint32_t', count));
    });
  }

  /** Resolves once no process is left in the scope; waits on a thread of the library's own. */
  async waitEmpty({ timeoutMs: ms } = {}) {
    const timeout = timeoutMs(ms, 'timeoutMs', DEFAULT_KILL_TIMEOUT_MS);
    const pointer = this.#live();
    await answered((queue, token) => c.handleWaitEmptyQueued(pointer, timeout, queue, token), settled);
  }

  /**
   * How the scope ended, answered after the manager has collected it too, from what this handle
   * kept since it was made (so make the handle while the tool runs): `kind` is 'running', 'oomd',
   * 'kernel-oom', 'handle-kill', 'on-its-own' or 'unknown'; `oomdRule` 'swap' or
   * 'memory-pressure' where oomd's signal names it or only one rule covers the scope; `evidence`
   * what the answer rests on, `forgeable` whether any process of the user could have made it. On
   * a thread of the library's own (never libuv's pool): the wait for oomd's signal (until oomd
   * answers a ping sent after its mark), and an oomd kill's rule asked of the user and system managers,
   * within `timeoutMs`. Once the scope has ended, the first answer is kept and given again.
   */
  async ending({ env, timeoutMs: ms } = {}) {
    const envp = envArray(env);
    const timeout = timeoutMs(ms, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS);
    const pointer = this.#live();
    const out = await answered((queue, token) => c.handleEndingQueued(pointer, envp, timeout, queue, token), (answer) => {
      settled(answer);
      return koffi.decode(c.answerEnding(answer), 'scope_ending');
    });
    const rule = OOMD_RULE_NAMES[out.rule];
    return {
      kind: word(ENDING_NAMES[out.kind] ?? 'UNKNOWN'),
      oomdRule: rule && rule !== 'UNKNOWN' ? word(rule) : null,
      kernelOomKills: Number(out.kernel_oom_kills),
      evidence: word(EVIDENCE_NAMES[out.evidence] ?? 'NONE'),
      forgeable: Boolean(out.forgeable),
    };
  }

  /** A watch on this scope for systemd-oomd's rules (`OomdWatch.create(this, options)`). */
  watchOomd(options = {}) {
    return OomdWatch.create(this, options);
  }

  /** Frees the handle now: a kill, waitEmpty or ending still running works on a copy of its own. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    handleRegistry.unregister(this);
    c.handleFree(this.#pointer);
    this.#pointer = null;
  }
}

module.exports = { ScopeHandle };
