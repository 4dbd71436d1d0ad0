// @ts-check
'use strict';
// The host of load.test.js, in a process of its own so that the test sees a crash as the signal
// that ended it. `calls SPAWNS`: 10,000 concurrent launcherForEnv (with the rig's manager and with
// none), handle and watch calls, and SPAWNS concurrent spawns, each tallied by how it settled.
// `workers ROUNDS`: workers terminated at random points of a spawn, a wait, a kill or a watch, or
// in the middle of the calls that hand the library C arrays.
// Prints one JSON line.
const fs = require('node:fs');
const { Worker } = require('node:worker_threads');

const scope = require('..');

const CALLS = 10_000;

/** How each promise settled: a word per outcome, counted. */
async function tally(/** @type {Array<Promise<string>>} */ promises) {
  /** @type {Record<string, number>} */
  const counts = {};
  for (const outcome of await Promise.all(promises)) counts[outcome] = (counts[outcome] ?? 0) + 1;
  return counts;
}

/** A rejection as a word: the ScopeError's code, else what else it was. */
function rejected(/** @type {any} */ error) {
  return error instanceof scope.ScopeError ? error.code : `not a ScopeError: ${error?.stack ?? error}`;
}

function noBusEnv() {
  const env = { ...process.env };
  delete env.XDG_RUNTIME_DIR;
  delete env.DBUS_SESSION_BUS_ADDRESS;
  return env;
}

/** A scoped `sleep` and the handle of its scope. */
async function sleeper(/** @type {string} */ seconds) {
  const child = await scope.spawn('sleep', [seconds], { stdio: 'ignore' });
  if (!child.scopeUnit || child.pid === undefined) throw new Error('the sleeper is not scoped');
  for (let i = 0; ; i++) {
    try {
      return { child, handle: scope.ScopeHandle.fromPid(child.scopeUnit, child.pid) };
    } catch (error) {
      if (i > 400) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

async function calls(/** @type {number} */ spawns) {
  const launchers = await tally(Array.from({ length: CALLS }, () => scope.launcherForEnv().then((launcher) => {
    launcher?.close();
    return launcher ? 'scoped' : 'direct';
  }, rejected)));
  const noManager = noBusEnv();
  const direct = await tally(Array.from({ length: CALLS }, () => scope.launcherForEnv({ env: noManager }).then(
    (launcher) => (launcher ? 'scoped' : 'direct'), rejected)));
  const { child, handle } = await sleeper('120');
  const unit = String(child.scopeUnit);
  const handles = await tally(Array.from({ length: CALLS }, (_, n) => {
    switch (n % 4) {
      case 0: return scope.ScopeHandle.fromManager(unit).then((found) => { found.close(); return 'found'; }, rejected);
      case 1: return handle.waitEmpty({ timeoutMs: 20 }).then(() => 'empty', rejected);
      case 2: return handle.ending().then((ending) => ending.kind, rejected);
      default: return handle.watchOomd().then((watch) => watch.close().then(() => 'watch'), (error) => error instanceof scope.CannotWarnError ? `cannot warn: ${error.kind}` : rejected(error));
    }
  }));
  const killed = await handle.kill();
  const spawned = await tally(Array.from({ length: spawns }, () => scope.spawn('true', [], { stdio: 'ignore' }).then(
    (spawnedChild) => new Promise((resolve) => {
      spawnedChild.on('error', (error) => resolve(`spawn failed: ${/** @type {any} */ (error).code}`));
      spawnedChild.on('exit', (code) => resolve(`exit ${code} ${spawnedChild.scopeUnit ? 'scoped' : 'direct'}`));
    }), rejected)));
  return { launchers, direct, handles, killed: killed.length, spawned };
}

/**
 * What each worker does, by its round: every other round the calls that hand the library C arrays
 * (a wrap and a check of limits) back to back, so that the termination lands in the middle of one
 * (koffi, converting a JS array, made the call with elements it never read: the host died of
 * SIGSEGV in 5 of 6 runs of 100 such rounds); the others a spawn, a wait, a kill or a watch, all in
 * flight.
 */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const scope = require(${JSON.stringify(require.resolve('..'))});
const { round, unit, pid } = workerData;
const handle = scope.ScopeHandle.fromPid(unit, pid);
const ignore = () => {};
const started = () => parentPort.postMessage('started');
if (round % 2 === 0) {
  scope.launcherForEnv().then((launcher) => {
    started();
    const env = { PATH: '/usr/bin:/bin' };
    for (;;) {
      launcher?.wrap(['true'], { env });
      scope.checkLimits({ MemoryMax: '1G' });
    }
  }, started);
} else {
  switch ((round >> 1) % 4) {
    case 0: scope.spawn('true', [], { stdio: 'ignore' }).then(ignore, ignore); break;
    case 1: handle.waitEmpty({ timeoutMs: 300 }).then(ignore, ignore); break;
    case 2: scope.spawn('sleep', ['30'], { stdio: 'ignore' }).then((child) => {
      const own = scope.ScopeHandle.fromManager(child.scopeUnit);
      return own.then((h) => h.kill());
    }).then(ignore, ignore); break;
    default: handle.watchOomd().then(ignore, ignore); handle.ending().then(ignore, ignore);
  }
  started();
}
`;

/** The threads and descriptors of this process. */
function resources() {
  return { threads: fs.readdirSync('/proc/self/task').length, fds: fs.readdirSync('/proc/self/fd').length };
}

async function workers(/** @type {number} */ rounds) {
  const { child, handle } = await sleeper('120');
  const before = resources();
  const at = { loading: 0, started: 0 };
  for (let round = 0; round < rounds; round += 8) {
    await Promise.all(Array.from({ length: Math.min(8, rounds - round) }, async (_, n) => {
      const worker = new Worker(WORKER, { eval: true, workerData: { round: round + n, unit: child.scopeUnit, pid: child.pid } });
      worker.on('error', () => {});
      // Terminated while loading the package, or 0 to 20 ms into its requests.
      const started = new Promise((resolve) => worker.once('message', resolve));
      if (Math.random() < 0.25) {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 30));
        at.loading++;
      } else {
        await started;
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20));
        at.started++;
      }
      await worker.terminate();
    }));
  }
  // The requests the workers left run out within their bounds (3 s at most); the next request
  // closes the sockets of the queues of workers gone with nothing in flight.
  await new Promise((resolve) => setTimeout(resolve, 4000));
  await handle.waitEmpty({ timeoutMs: 1 }).catch(() => {});
  const after = resources();
  await handle.kill();
  return { rounds, at, before, after };
}

(async () => {
  const [mode, count] = process.argv.slice(2);
  const report = mode === 'calls' ? await calls(Number(count)) : await workers(Number(count));
  console.log(JSON.stringify(report));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
