'use strict';
// The warning before systemd-oomd acts, where it cannot be given: the watch says why when it is
// made (a CannotWarnError with its kind), never a silent watch. Against the rig's real manager, a
// stand-in oomd on a bus standing for the system bus (tests/tools/oomd_bus.py, named as such: no
// manager on that bus says which rules cover the scope), and with no system bus at all. The
// warnings themselves come from the real oomd in the virtual machine (scripts/test-vm.sh).
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { test } = require('node:test');

const scope = require('..');
const { handleOnceInScope, requireRig, scratchDir } = require('./helpers.js');

const oomdBusScript = path.join(__dirname, '..', '..', '..', 'tests', 'tools', 'oomd_bus.py');
const noSystemBus = { ...process.env, DBUS_SYSTEM_BUS_ADDRESS: 'unix:path=/nonexistent/system_bus_socket' };

/** A tool in its own scope and a handle on it; both ended when the test ends. */
async function scoped(/** @type {import('node:test').TestContext} */ t) {
  const child = await scope.spawn('sleep', ['100'], { stdio: 'ignore' });
  const handle = await handleOnceInScope(child);
  t.after(async () => {
    await handle.kill().catch(() => {});
    handle.close();
    // Where the test closed the handle itself, its kill was refused: the tool is ended here, or
    // it would hold the test's process for its 100 s.
    child.kill('SIGKILL');
  });
  return handle;
}

test('with no system bus a watch says oomd cannot be asked, as a CannotWarnError', async (t) => {
  if (!requireRig(t)) return;
  const handle = await scoped(t);
  await assert.rejects(handle.watchOomd({ env: noSystemBus }), (error) => {
    assert.ok(error instanceof scope.CannotWarnError && error instanceof scope.ScopeError);
    assert.equal(error.code, 'SCOPE_CANNOT_WARN');
    assert.equal(error.kind, 'no-oomd');
    assert.match(error.message, /\/nonexistent\/system_bus_socket/);
    return true;
  });
});

test('where no manager says which rules cover the scope, the watch says so, without blocking the event loop', async (t) => {
  if (!requireRig(t)) return;
  const child = spawn('python3', [oomdBusScript, scratchDir(t, 'oomd-bus')], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => child.stdin.end());
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const ready = String((await lines.next()).value).split(' ');
  assert.equal(ready[0], 'ready');
  const env = { ...process.env, DBUS_SYSTEM_BUS_ADDRESS: ready[1] };
  const handle = await scoped(t);
  const started = Date.now();
  let settled = false;
  const made = scope.OomdWatch.create([handle], { env });
  made.then(() => {}, () => {}).finally(() => {
    settled = true;
  });
  assert.equal(settled, false, 'asked on a thread of its own: create returned before the answer');
  await assert.rejects(made, (error) => {
    assert.ok(error instanceof scope.CannotWarnError);
    assert.equal(error.kind, 'cannot-ask');
    assert.match(error.message, /-\.slice could not say/);
    return true;
  });
  assert.ok(Date.now() - started < 4000, 'within its bound');
});

test('bad arguments are refused before anything is asked', async (t) => {
  if (!requireRig(t)) return;
  const handle = await scoped(t);
  assert.throws(() => scope.OomdWatch.create([/** @type {any} */ ({})]), /handles\[0\] must be a ScopeHandle/);
  assert.throws(() => scope.OomdWatch.create(handle, { timeoutMs: -1 }), RangeError);
  await assert.rejects(scope.OomdWatch.create(handle, { timeoutMs: 0 }), { code: 'SCOPE_INVALID_ARGUMENT' });
  await assert.rejects(scope.OomdWatch.create([], { env: noSystemBus }), (error) => {
    assert.ok(error instanceof scope.CannotWarnError);
    assert.equal(error.kind, 'scope-gone');
    return true;
  });
  const closed = await scoped(t);
  closed.close();
  assert.throws(() => closed.watchOomd(), /closed/);
});

test('a watch with a listener lives as long as the listener: once() on a watch nothing else holds', async () => {
  const { once } = require('node:events');
  const v8 = require('node:v8');
  const vm = require('node:vm');
  // OomdWatch's own base (a watch itself needs a real oomd: the virtual machine), required by a
  // path its types do not follow: the package's mechanism, not its API.
  const { ListenedEmitter } = require(path.join(__dirname, '..', 'lib', 'oomd_watch.js'));
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  const kept = new Set();
  let open = true;
  let collected = 0;
  const registry = new FinalizationRegistry(() => {
    collected += 1;
  });
  /** A watch as OomdWatch makes one, with nothing but the returned promise holding it. */
  function temporary() {
    const emitter = new ListenedEmitter('warning', kept, () => open);
    registry.register(emitter, null);
    return { waiting: once(emitter, 'warning'), weak: new WeakRef(emitter) };
  }
  const settle = async () => {
    for (let round = 0; round < 5; round += 1) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  const { waiting, weak } = temporary();
  await settle();
  assert.equal(collected, 0, 'the listened watch was collected under its listener');
  weak.deref()?.emit('warning', 'came');
  assert.deepEqual(await waiting, ['came']);
  assert.equal(kept.size, 0, 'let go once nothing listens');
  // A host that removed every listener, 'newListener' ones included, still has it kept by once().
  const second = temporary();
  second.weak.deref()?.removeAllListeners('newListener');
  await settle();
  assert.equal(kept.size, 1);
  second.weak.deref()?.removeAllListeners();
  assert.equal(kept.size, 0, 'removeAllListeners lets it go');
  // Closed, a listener keeps nothing; without a listener, nothing keeps it.
  open = false;
  (() => {
    const closed = new ListenedEmitter('warning', kept, () => open);
    closed.on('warning', () => {});
    registry.register(closed, null);
  })();
  assert.equal(kept.size, 0, 'a closed watch is not kept by a listener');
  for (let round = 0; round < 20 && collected < 3; round += 1) await settle();
  assert.equal(collected, 3, 'every watch collected once nothing keeps it');
});
