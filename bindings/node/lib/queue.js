'use strict';
// Requests the library answers on a thread of its own (the C ABI's *_queued exports), their
// answers taken from a queue of the package's own on the event loop: the library writes a byte to
// a socket this module reads with a net.Socket, and each answer is taken here, on this thread.
// Nothing calls into JavaScript from the library's threads, so no koffi limit on cross-thread
// callbacks (256 in flight, past which koffi throws on a foreign thread and the process dies)
// bounds how many requests run at once, and a worker terminated with requests in flight leaves
// nothing behind that could call into it: Node closes the socket, and the library frees the
// answers that come for it. No wait sits on the event loop or on libuv's shared pool.
const net = require('node:net');

const { ANSWER_KINDS, RESULT } = require('./abi.js');
const { ScopeError, failure } = require('./error.js');
const { c } = require('./library.js');

/** The token of log lines (`scope_set_log_queue`); requests count from 1. */
const LOG_TOKEN = 0;
/** Takes the library's log lines where this thread set the log queue (`takeLogLines`). */
let logTaker = null;

/** This thread's queue: the library's handle and the socket it wakes, made on first use. */
let queue = null;
/** The requests waiting for their answer, by token: each takes its answer. */
const waiting = new Map();
/** Who takes the events (warnings, log lines) of each token. */
const listeners = new Map();
let nextToken = 1;

function open() {
  if (queue) return queue;
  const reader = [-1];
  const out = [null];
  const made = c.queueNew(reader, out);
  if (made !== RESULT.OK) throw failure(made);
  const socket = new net.Socket({ fd: reader[0], readable: true, writable: false });
  queue = { pointer: out[0], socket };
  socket.on('data', drain);
  socket.on('error', (error) => lost(`the queue's socket failed: ${error.message}`));
  socket.on('end', () => lost('the queue\'s socket was closed'));
  // Only requests in flight hold the event loop open (`hold`), not a watch or the log.
  socket.unref();
  return queue;
}

/**
 * The queue is gone (its socket failed, which nothing here does): every request waiting is
 * rejected, and the next one makes a new queue.
 */
function lost(why) {
  if (!queue) return;
  const { pointer, socket } = queue;
  queue = null;
  socket.destroy();
  c.queueFree(pointer);
  const error = new ScopeError(RESULT.IO, `synaps-scope: ${why}`);
  for (const settle of waiting.values()) settle(null, error);
  waiting.clear();
}

/** Takes every answer waiting and hands each to its taker; each answer is freed here. */
function drain() {
  if (!queue) return;
  for (;;) {
    const out = [null];
    if (c.queueTake(queue.pointer, out) !== RESULT.OK || !out[0]) return;
    const answer = out[0];
    try {
      const token = Number(c.answerToken(answer));
      const settle = waiting.get(token);
      if (c.answerKindOf(answer) === ANSWER_KINDS.log) {
        // Also the line saying the queue dropped events, whichever token it comes with.
        logTaker?.(answer);
      } else if (settle) {
        waiting.delete(token);
        if (waiting.size === 0) queue.socket.unref();
        settle(answer, null);
      } else {
        listeners.get(token)?.(answer);
      }
    } finally {
      c.answerFree(answer);
    }
  }
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
    const { pointer, socket } = open();
    const token = nextToken++;
    if (onEvent) listeners.set(token, onEvent);
    const started = start(pointer, token);
    if (started !== RESULT.OK) {
      listeners.delete(token);
      reject(failure(started));
      return;
    }
    onStart?.(token);
    if (waiting.size === 0) socket.ref();
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

/** Sends the library's log lines to `take(answer)`, process-wide (call on the main thread only). */
function takeLogLines(take) {
  logTaker = take;
  const made = c.setLogQueue(open().pointer, LOG_TOKEN);
  if (made !== RESULT.OK) throw failure(made);
}

module.exports = { answered, drain, forget, settled, takeLogLines };
