'use strict';
// The warning before systemd-oomd acts: an `OomdWatch` is an EventEmitter whose 'warning' events
// come on the event loop. The watch is made on a thread of the library's own (the managers are
// asked within a bound), and its warnings come through the package's queue (`queue.js`) with the
// request's token: the library's watching thread never calls into JavaScript, so freeing a watch
// waits for nothing but a warning being queued.
const { EventEmitter } = require('node:events');
const koffi = require('koffi');

const { CANNOT_WARN_NAMES, DEFAULT_PROBE_TIMEOUT_MS, OOMD_RULE_NAMES, RESULT, SURENESS_NAMES, word } = require('./abi.js');
const { envArray, handlePointers, timeoutMs } = require('./args.js');
const { ScopeError, check } = require('./error.js');
const { c } = require('./library.js');
const { answered, forget, settled } = require('./queue.js');

/** None of the scopes given can be warned about: `kind` says why ('no-oomd', 'no-rule', …). */
class CannotWarnError extends ScopeError {
  constructor(message, kind) {
    super(RESULT.CANNOT_WARN, message);
    this.name = 'CannotWarnError';
    this.kind = kind;
  }
}

/** Frees a watch (no warning is queued after) and drops those of its warnings still queued. */
function freeWatch(pointer, token) {
  c.oomdWatchFree(pointer);
  forget(token);
}

const watchRegistry = new FinalizationRegistry(({ pointer, token }) => freeWatch(pointer, token));

/** The watches something listens to: kept from collection while they have a listener. */
const listened = new Set();

/** A warning as the library hands it over, in this package's words. */
function warningOf(raw) {
  return Object.freeze({
    unit: raw.unit,
    rule: word(OOMD_RULE_NAMES[raw.rule] ?? 'UNKNOWN'),
    monitored: raw.monitored,
    figure: raw.figure,
    limit: raw.limit,
    heldForMs: Number(raw.held_for_usec) / 1000,
    durationMs: Number(raw.duration_usec) / 1000,
    sure: word(SURENESS_NAMES[raw.sure] ?? 'POSSIBLE'),
    message: raw.message,
  });
}

/**
 * An EventEmitter that lives as long as it has a listener for `event` (held in `kept`) while
 * `open()` says it is open: someone waits on it, as `await once(await handle.watchOomd(),
 * 'warning')` does on a watch nothing else holds. Every way a listener comes or goes passes
 * through these methods (`once` and `events.once` too, and a once-listener's own removal),
 * whatever listeners of 'newListener' the host removed.
 */
class ListenedEmitter extends EventEmitter {
  #event;
  #kept;
  #open;

  constructor(event, kept, open) {
    super();
    this.#event = event;
    this.#kept = kept;
    this.#open = open;
  }

  addListener(event, listener) {
    super.addListener(event, listener);
    return this.#listened(event);
  }

  on(event, listener) {
    return this.addListener(event, listener);
  }

  prependListener(event, listener) {
    super.prependListener(event, listener);
    return this.#listened(event);
  }

  once(event, listener) {
    super.once(event, listener);
    return this.#listened(event);
  }

  prependOnceListener(event, listener) {
    super.prependOnceListener(event, listener);
    return this.#listened(event);
  }

  removeListener(event, listener) {
    super.removeListener(event, listener);
    return this.#listened(event);
  }

  off(event, listener) {
    return this.removeListener(event, listener);
  }

  removeAllListeners(event) {
    if (event === undefined) super.removeAllListeners();
    else super.removeAllListeners(event);
    return this.#listened(this.#event);
  }

  /** Keeps this while it is open and has a listener of its event, lets it go otherwise. */
  #listened(event) {
    if (event !== this.#event) return this;
    if (this.#open() && this.listenerCount(event) > 0) this.#kept.add(this);
    else this.#kept.delete(this);
    return this;
  }
}

/**
 * Watches scopes for systemd-oomd's rules and emits 'warning' (an object: `unit`, `rule`
 * ('memory-pressure' or 'swap'), `monitored`, `figure` and `limit` in percent, `heldForMs`,
 * `durationMs`, `sure` ('possible' or 'likely'), `message`) when oomd is on its way to kill one.
 * Made with `OomdWatch.create` or `handle.watchOomd`; `close()` stops it (no event after it
 * resolves). It does not hold the event loop open. A watch with a 'warning' listener lives as long as
 * the listener (`await once(await OomdWatch.create(…), 'warning')` waits on a watch nothing else
 * holds); one with none and no reference is closed when collected.
 */
class OomdWatch extends ListenedEmitter {
  #pointer;
  #token;
  #closed = false;

  constructor(pointer, token) {
    super('warning', listened, () => !this.#closed);
    this.#pointer = pointer;
    this.#token = token;
    /** The units of the scopes this watch can warn about. */
    this.watched = Object.freeze(
      Array.from({ length: Number(c.oomdWatchWatchedCount(pointer)) }, (_, at) => c.oomdWatchWatched(pointer, at)),
    );
    /** The scopes given that it cannot warn about: `{unit, kind, message}` each. */
    this.cannotWarn = Object.freeze(
      Array.from({ length: Number(c.oomdWatchCannotCount(pointer)) }, (_, at) => {
        const out = {};
        c.oomdWatchCannot(pointer, at, out);
        return Object.freeze({ unit: out.unit, kind: word(CANNOT_WARN_NAMES[out.kind] ?? 'NONE'), message: out.message });
      }),
    );
    watchRegistry.register(this, { pointer, token }, this);
  }

  /**
   * Watches the scopes of `handles` (a ScopeHandle or an array of them): asks the managers and the
   * system bus (`env`'s) within `timeoutMs` which rules cover each, on a thread of the library's
   * own. Rejects with CannotWarnError where none can be warned about.
   */
  static create(handles, { env, timeoutMs: ms } = {}) {
    const watched = handlePointers(handles, 'handles');
    const envp = envArray(env);
    const timeout = timeoutMs(ms, 'timeoutMs', DEFAULT_PROBE_TIMEOUT_MS);
    /** @type {WeakRef<OomdWatch> | null} */
    let target = null;
    /** Warnings that came before the watch was handed over. */
    const early = [];
    /** @type {number} */
    let token = 0;
    const onEvent = (answer) => {
      const raw = c.answerOomdWarning(answer);
      if (!raw) return;
      const warning = warningOf(koffi.decode(raw, 'scope_oomd_warning'));
      if (target === null) early.push(warning);
      else target.deref()?.#deliver(warning);
    };
    const start = (queue, t) => c.oomdWatchNewQueued(watched.array, watched.count, envp, timeout, queue, t);
    return answered(start, (answer) => {
      if (c.answerResult(answer) === RESULT.CANNOT_WARN) {
        const kind = word(CANNOT_WARN_NAMES[c.answerCannotWarnKind(answer)] ?? 'NONE');
        throw new CannotWarnError(`synaps-scope: ${c.answerError(answer)}`, kind);
      }
      settled(answer);
      const out = [null];
      check(c.answerTakeOomdWatch(answer, out));
      const watch = new OomdWatch(out[0], token);
      target = new WeakRef(watch);
      setImmediate(() => {
        for (const warning of early.splice(0)) watch.#deliver(warning);
      });
      return watch;
    }, { onEvent, onStart: (t) => { token = t; } });
  }

  #deliver(warning) {
    if (this.#closed) return;
    try {
      this.emit('warning', warning);
    } catch (error) {
      // A listener's exception is the host's, as for any emitter: thrown again outside the library.
      process.nextTick(() => {
        throw error;
      });
    }
  }

  /** Stops the watch; resolves once no 'warning' can come any more (at once). */
  close() {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    watchRegistry.unregister(this);
    listened.delete(this);
    freeWatch(this.#pointer, this.#token);
    this.#pointer = null;
    return Promise.resolve();
  }
}

module.exports = { CannotWarnError, ListenedEmitter, OomdWatch };
