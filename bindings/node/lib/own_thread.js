'use strict';
// Requests the library answers on a thread of its own (the C ABI's *_async exports): the event
// loop never waits, and no wait sits on libuv's shared pool, which a host needs for its files,
// DNS and crypto. The callback comes back on the event loop, exactly once.
const koffi = require('koffi');

const { failure } = require('./error.js');

/**
 * Calls `start(ready)`, an export that answers on its own thread by calling `ready` of type
 * `proto` (within `boundMs`), and resolves with `settle(...ready's arguments)` on the event loop;
 * rejects with what `settle` throws, or with the export's error where it did not start.
 */
function answeredOnOwnThread(proto, boundMs, start, settle) {
  return new Promise((resolve, reject) => {
    // Holds the event loop open until the request's thread has answered (it always does, within
    // the bound; the margin only covers a machine too loaded to schedule it).
    const keepAlive = setTimeout(() => {}, boundMs + 60_000);
    const ready = koffi.register((...args) => {
      clearTimeout(keepAlive);
      setImmediate(() => koffi.unregister(ready));
      try {
        resolve(settle(...args));
      } catch (error) {
        reject(error);
      }
    }, koffi.pointer(proto));
    const started = start(ready);
    if (started !== 0) {
      clearTimeout(keepAlive);
      koffi.unregister(ready);
      reject(failure(started));
    }
  });
}

module.exports = { answeredOnOwnThread };
