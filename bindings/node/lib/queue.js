'use strict';
// Requests the library answers on a thread of its own (the C ABI's *_queued exports), their
// answers taken from a queue of the package's own on the event loop: the library writes a byte to
// a socket this module reads with a net.Socket, and each answer is taken here, on this thread.
// Nothing calls into JavaScript from the library's threads, so no koffi limit on cross-thread
// callbacks (256 in flight, past which koffi throws on a foreign thread and the process dies)
// bounds how many requests run at once, and a worker terminated with requests in flight leaves
// nothing behind that could call into it: Node closes the socket, and the library frees the
// answers that come for it and stops the watches made through it. No wait sits on the event loop
// or on libuv's shared pool.
const net = require('node:net');

const { ANSWER_KINDS, RESULT } = require('./abi.js');
const { ScopeError, failure } = require('./error.js');
const { c } = require('./library.js');

/** The kinds of answer that settle a request; the others (warnings, log lines) are events. */
const REQUEST_KINDS = new Set([
  ANSWER_KINDS.launcher, ANSWER_KINDS.handle, ANSWER_KINDS.ending, ANSWER_KINDS.pids, ANSWER_KINDS.done, ANSWER_KINDS.oomdWatch,
]);

/** A queue of the library's and the socket it wakes; `take(answer)` is handed each answer. */
class AnswerQueue {
  /**
   * @param {(answer: unknown) => void} take
   * @param {(why: string) => void} onLost called once should the socket fail (nothing here makes
   *   it): the queue is freed, and takes nothing more
   */
  constructor(take, onLost) {
    const reader = [-1];
    const out = [null];
    const made = c.queueNew(reader, out);
    if (made !== RESULT.OK) throw failure(made);
    this.pointer = out[0];
    this.take = take;
    this.socket = new net.Socket({ fd: reader[0], readable: true, writable: false });
    this.socket.on('data', () => this.drain());
    const lost = (/** @type {string} */ why) => {
      if (!this.pointer) return;
      this.socket.destroy();
      c.queueFree(this.pointer);
      this.pointer = null;
      onLost(why);
    };
    this.socket.on('error', (error) => lost(`the queue's socket failed: ${error.message}`));
    this.socket.on('end', () => lost('the queue\'s socket was closed'));
    // Only what waits for an answer holds the event loop open (`hold`), not a watch or the log.
    this.socket.unref();
  }

  /** Holds the event loop open (true) while answers are awaited, or lets it go. */
  hold(/** @type {boolean} */ awaited) {
    if (awaited) this.socket.ref();
    else this.socket.unref();
  }

  /** Takes every answer waiting and hands each to `take`; each answer is freed here. */
  drain() {
    while (this.pointer) {
      const out = [null];
      if (c.queueTake(this.pointer, out) !== RESULT.OK || !out[0]) return;
      try {
        this.take(out[0]);
      } finally {
        c.answerFree(out[0]);
      }
    }
  }
}

/** This thread's queue of requests, made on first use. */
let requests = null;
/** The requests waiting for their answer, by token: each takes its answer. */
const waiting = new Map();
/** Who takes the events (a watch's warnings) of each token. */
const listeners = new Map();
let nextToken = 1;

/** Hands an answer of the requests' queue to its taker: a request's, a watch's, or a log line. */
function dispatch(answer) {
  const token = Number(c.answerToken(answer));
  const kind = c.answerKindOf(answer);
  if (REQUEST_KINDS.has(kind)) {
    const settle = waiting.get(token);
    if (!settle) return;
    waiting.delete(token);
    if (waiting.size === 0) requests?.hold(false);
    settle(answer, null);
  } else if (kind === ANSWER_KINDS.log) {
    // The queue's own line saying it dropped warnings a stalled loop did not take.
    const message = c.answerLogLine(answer, [0]);
    if (message !== null) console.warn(`synaps-scope: warn: ${message}`);
  } else {
    listeners.get(token)?.(answer);
  }
}

function open() {
  requests ??= new AnswerQueue(dispatch, (why) => {
    requests = null;
    const error = new ScopeError(RESULT.IO, `synaps-scope: ${why}`);
    for (const settle of waiting.values()) settle(null, error);
    waiting.clear();
  });
  return requests;
}

/**
 * Calls `start(queuePointer, token)`, an export that answers to the queue, and resolves with
 * `take(answer)` once its answer is in, on the event loop; rejects with what `take` throws (it
 * throws the answer's failure with `settled`), or with the export's error where it did not start.
 * `onEvent`, where given, takes the events that come with the same token (a watch's warnings)
 * until `forget(token)`; `onStart(token)` learns the token.
 */
function answered(start, take, { onEvent, onStart } = {}) {
  return new Promise((resolve, reject) => {
    const queue = open();
    const token = nextToken++;
    if (onEvent) listeners.set(token, onEvent);
    const started = start(queue.pointer, token);
    if (started !== RESULT.OK) {
      listeners.delete(token);
      reject(failure(started));
      return;
    }
    onStart?.(token);
    if (waiting.size === 0) queue.hold(true);
    waiting.set(token, (answer, error) => {
      if (error) {
        listeners.delete(token);
        reject(error);
        return;
      }
      try {
        resolve(take(answer));
      } catch (thrown) {
        listeners.delete(token);
        reject(thrown);
      }
    });
  });
}

/** Throws the failure an answer carries. */
function settled(answer) {
  const result = c.answerResult(answer);
  if (result !== RESULT.OK) throw failure(result, c.answerError(answer) ?? 'the request failed');
}

/** Stops handing `token`'s events to anyone (events already queued are dropped as they come). */
function forget(token) {
  listeners.delete(token);
}

module.exports = { AnswerQueue, answered, forget, settled };
