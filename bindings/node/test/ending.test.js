// @ts-check
'use strict';
// How a scope ended, from Node: told by a handle made while the tool ran, asked only after the
// tool's exit status is in and the manager has collected the scope, with what each answer rests on.
// The rig's cgroup2 tree has no memory controller, so an ending without evidence of a kill is
// 'unknown' here (the virtual machine shows 'on-its-own', 'kernel-oom' and the real systemd-oomd's
// kills). There is no system bus on the rig: oomd's mark (written here as oomd writes it, a
// stand-in) is the evidence, said to be forgeable.
const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const { once } = require('node:events');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { test } = require('node:test');

const scope = require('..');
const { handleOnceInScope, requireRig, scratchDir } = require('./helpers.js');

const stopManagerScript = path.join(__dirname, '..', '..', '..', 'tests', 'tools', 'stop_manager.py');
const oomdBusScript = path.join(__dirname, '..', '..', '..', 'tests', 'tools', 'oomd_bus.py');

/** Runs `work` with the rig's manager stopped (SIGSTOP): a scope that empties meanwhile stays
 * uncollected, as in the moment between a tool's exit and the manager's clean-up (a watchdog
 * continues it after 5 s should this process die first). */
async function withManagerStopped(/** @type {() => Promise<void>} */ work) {
  const pid = Number(execFileSync('python3', [stopManagerScript], { encoding: 'utf8' }));
  try {
    await work();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}

/** An ending without evidence of a kill: on its own with a memory controller, else unknown. */
function noKill(/** @type {scope.ScopeHandle} */ handle) {
  const memory = fs.readFileSync(path.join(handle.cgroup, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('memory');
  return memory
    ? { kind: 'on-its-own', oomdRule: null, kernelOomKills: 0, evidence: 'memory-events', forgeable: false }
    : { kind: 'unknown', oomdRule: null, kernelOomKills: 0, evidence: 'none', forgeable: false };
}

/** An ending without evidence of a kill, asked after the scope was collected. */
function noKillAfter(/** @type {scope.ScopeHandle} */ handle) {
  const subtree = fs.readFileSync(path.join(path.dirname(handle.cgroup), 'cgroup.subtree_control'), 'utf8');
  const [kind, evidence] = subtree.split(/\s+/).includes('memory') ? ['on-its-own', 'memory-events'] : ['unknown', 'none'];
  return { kind, oomdRule: null, kernelOomKills: 0, evidence, forgeable: false };
}

async function collected(/** @type {scope.ScopeHandle} */ handle) {
  const deadline = Date.now() + 10_000;
  while (fs.existsSync(handle.cgroup)) {
    assert.ok(Date.now() < deadline, 'the manager never collected the scope');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test("a handle's kill is told after the scope is collected, by every handle on it", async (t) => {
  if (!requireRig(t)) return;
  const child = await scope.spawn('sh', ['-c', 'sleep 100 & exec sleep 100'], { stdio: 'ignore' });
  const handle = await handleOnceInScope(child);
  assert.equal((await handle.ending()).kind, 'running');
  const other = scope.ScopeHandle.ofProcess(Number(child.pid));
  const exited = once(child, 'exit');
  await handle.kill();
  assert.deepEqual(await exited, [null, 'SIGKILL']);
  await collected(handle);
  assert.deepEqual(await handle.ending(), { kind: 'handle-kill', oomdRule: null, kernelOomKills: 0, evidence: 'own-kill', forgeable: false });
  // Another handle knows of the kill by its mark alone, which any process of the user could write.
  assert.deepEqual(await other.ending(), { kind: 'handle-kill', oomdRule: null, kernelOomKills: 0, evidence: 'kill-mark', forgeable: true });
  handle.close();
  other.close();
  await assert.rejects(handle.ending(), /closed/);
});

test('a clean-up kill of an empty scope is not a kill', async (t) => {
  if (!requireRig(t)) return;
  const child = await scope.spawn('sh', ['-c', 'echo ready; read x; exit 0'], { stdio: ['pipe', 'pipe', 'ignore'] });
  const exited = once(child, 'exit');
  // The tool itself runs (the launcher program is done with the manager) before it is stopped.
  const [ready] = await once(/** @type {import('node:stream').Readable} */ (child.stdout), 'data');
  assert.equal(String(ready), 'ready\n');
  const handle = await handleOnceInScope(child);
  const expected = noKill(handle);
  await withManagerStopped(async () => {
    child.stdin?.end();
    assert.deepEqual(await exited, [0, null]);
    assert.ok(fs.existsSync(handle.cgroup), 'the stopped manager left the scope');
    assert.deepEqual(await handle.kill(), []);
  });
  await collected(handle);
  assert.deepEqual(await handle.ending(), expected);
  handle.close();
});

test("oomd's mark is told as its kill; an ending without a mark is not guessed", async (t) => {
  if (!requireRig(t)) return;
  const killed = await scope.spawn('sleep', ['100'], { stdio: 'ignore' });
  const quiet = await scope.spawn('sh', ['-c', 'read x; exit 3'], { stdio: ['pipe', 'ignore', 'ignore'] });
  const quietExit = once(quiet, 'exit');
  const quietHandle = await handleOnceInScope(quiet);
  const killedHandle = await handleOnceInScope(killed);
  // systemd-oomd marks a cgroup (user.oomd_ooms) before it kills it: played here exactly so.
  execFileSync('python3', ['-c', 'import os, sys; os.setxattr(sys.argv[1], "user.oomd_ooms", b"1")', killedHandle.cgroup]);
  const killedExit = once(killed, 'exit');
  fs.writeFileSync(path.join(killedHandle.cgroup, 'cgroup.kill'), '1');
  assert.deepEqual(await killedExit, [null, 'SIGKILL']);
  await collected(killedHandle);
  assert.deepEqual(await killedHandle.ending({ timeoutMs: 2000 }), { kind: 'oomd', oomdRule: null, kernelOomKills: 0, evidence: 'oomd-mark', forgeable: true });
  killedHandle.close();
  quiet.stdin?.end();
  assert.deepEqual(await quietExit, [3, null]);
  await collected(quietHandle);
  assert.deepEqual(await quietHandle.ending(), noKillAfter(quietHandle));
  quietHandle.close();
});

test("an oomd kill swept up by a handle's kill is still oomd's", async (t) => {
  if (!requireRig(t)) return;
  // oomd (a stand-in) kills the cgroup the tool made below its scope, and marks it after the kill
  // as every version does (user.oomd_kill, the only mark before 251); the daemon then kills the
  // scope to sweep up the tool itself: what ended the tool was oomd's.
  const script = 'read dir; sleep 100 & echo $! > "$dir/leaf/cgroup.procs"; echo moved; exec sleep 100';
  const child = await scope.spawn('sh', ['-c', script], { stdio: ['pipe', 'pipe', 'ignore'] });
  const exited = once(child, 'exit');
  const handle = await handleOnceInScope(child);
  const leaf = path.join(handle.cgroup, 'leaf');
  fs.mkdirSync(leaf);
  child.stdin?.write(`${handle.cgroup}\n`);
  const [moved] = await once(/** @type {import('node:stream').Readable} */ (child.stdout), 'data');
  assert.equal(String(moved), 'moved\n');
  fs.writeFileSync(path.join(leaf, 'cgroup.kill'), '1');
  const deadline = Date.now() + 10_000;
  while (fs.readFileSync(path.join(leaf, 'cgroup.procs'), 'utf8').trim() !== '') {
    assert.ok(Date.now() < deadline, 'the kill below the scope did not empty it');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  execFileSync('python3', ['-c', 'import os, sys; os.setxattr(sys.argv[1], "user.oomd_kill", b"1")', leaf]);
  assert.deepEqual(await handle.kill(), [Number(child.pid)]);
  assert.deepEqual(await exited, [null, 'SIGKILL']);
  await collected(handle);
  assert.deepEqual(await handle.ending(), { kind: 'oomd', oomdRule: null, kernelOomKills: 0, evidence: 'oomd-mark', forgeable: true });
  handle.close();
});

/** A bus standing for the system bus with a stand-in systemd-oomd on it (tests/tools/oomd_bus.py;
 * the real oomd acts in the virtual machine), and the environment that names it. With
 * `slowSetUp` (seconds), the environment names a stand-in in front of the bus that holds a
 * subscription's question on oomd's introspection that long. */
async function oomdBus(/** @type {import('node:test').TestContext} */ t, { slowSetUp = /** @type {number | undefined} */ (undefined) } = {}) {
  const slow = slowSetUp === undefined ? [] : [String(slowSetUp)];
  const child = spawn('python3', [oomdBusScript, scratchDir(t, 'oomd-bus'), ...slow], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => child.stdin.end());
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const ready = String((await lines.next()).value).split(' ');
  assert.equal(ready[0], 'ready');
  return {
    env: { ...process.env, DBUS_SYSTEM_BUS_ADDRESS: ready[1] },
    /** Sends oomd's Killed(cgroup, reason), as oomd does after a kill. */
    async killed(/** @type {string} */ cgroup, /** @type {string} */ reason) {
      child.stdin.write(`kill ${cgroup} ${reason}\n`);
      assert.equal((await lines.next()).value, 'sent');
    },
    /** oomd's whole kill of the cgroup at `dir` in one turn of its loop (its mark, the kill,
     * `busyMs` of other work, its signal), answering nothing on the bus meanwhile; resolves once
     * the signal is out. */
    async oomdKill(/** @type {string} */ dir, /** @type {string} */ cgroup, /** @type {string} */ reason, /** @type {number} */ busyMs) {
      child.stdin.write(`oomd-kill ${dir} ${cgroup} ${reason} ${busyMs}\n`);
      assert.equal((await lines.next()).value, 'sent');
    },
  };
}

/** A tool that makes a cgroup below its scope (named by its first argument) and moves into it;
 * resolves to it and a handle on its scope made with `env` (which names the system bus), once it
 * has moved. */
async function scopedBelow(/** @type {string} */ name, /** @type {NodeJS.ProcessEnv} */ env) {
  const script = 'd="/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)/$1"; mkdir "$d" && echo $$ > "$d/cgroup.procs" && echo moved && exec sleep 100';
  const child = await scope.spawn('sh', ['-c', script, 'sh', name], { stdio: ['ignore', 'pipe', 'inherit'] });
  // The tool runs only once its scope is made: asked after it spoke, the manager knows the scope.
  const [moved] = await once(/** @type {import('node:stream').Readable} */ (child.stdout), 'data');
  assert.equal(String(moved), 'moved\n');
  const handle = await scope.ScopeHandle.fromManager(String(child.scopeUnit), { env });
  return { child, handle };
}

/** oomd's kill of the cgroup `below` the scope of `handle`: its mark, the kill, its signal. */
async function oomdKills(/** @type {scope.ScopeHandle} */ handle, /** @type {string} */ below, /** @type {Awaited<ReturnType<typeof oomdBus>>} */ bus, /** @type {string} */ reason) {
  const leaf = path.join(handle.cgroup, below);
  execFileSync('python3', ['-c', 'import os, sys; os.setxattr(sys.argv[1], "user.oomd_ooms", b"1")', leaf]);
  fs.writeFileSync(path.join(leaf, 'cgroup.kill'), '1');
  await bus.killed(`/${path.relative('/sys/fs/cgroup', handle.cgroup)}/${below}`, reason);
}

// oomd's signal comes 1 s after its kill (busy in the same turn of its loop) and after the
// question: the answer waits for it.
test("oomd's kill of a cgroup below the scope is told by its signal", async (t) => {
  if (!requireRig(t)) return;
  const bus = await oomdBus(t);
  const { child, handle } = await scopedBelow('leaf', bus.env);
  const exited = once(child, 'exit');
  const cgroup = `/${path.relative('/sys/fs/cgroup', handle.cgroup)}/leaf`;
  const sent = bus.oomdKill(path.join(handle.cgroup, 'leaf'), cgroup, 'memory-pressure', 1000);
  assert.deepEqual(await exited, [null, 'SIGKILL']);
  await collected(handle);
  assert.deepEqual(await handle.ending({ env: bus.env }), { kind: 'oomd', oomdRule: 'memory-pressure', kernelOomKills: 0, evidence: 'oomd-signal', forgeable: false });
  await sent;
  handle.close();
});

// A system bus slow to answer the subscription's set-up (oomd's introspection held 1 s, as a
// machine amid the thrash oomd acts on was seen to answer past the quarter second a handle waits):
// the handle is made without waiting for it, and oomd's kill once the set-up is done is told by
// its signal.
test("a kill after a slow set-up of oomd's signal is heard", async (t) => {
  if (!requireRig(t)) return;
  const bus = await oomdBus(t, { slowSetUp: 1 });
  const child = await scope.spawn('sh', ['-c', 'echo ready; exec sleep 100'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  const [ready] = await once(/** @type {import('node:stream').Readable} */ (child.stdout), 'data');
  assert.equal(String(ready), 'ready\n');
  const asked = performance.now();
  const handle = await scope.ScopeHandle.fromManager(String(child.scopeUnit), { env: bus.env });
  const waited = performance.now() - asked;
  assert.ok(waited < 900, `the handle waited ${waited} ms for the slow bus`);
  await new Promise((resolve) => setTimeout(resolve, 3000)); // the held question answered after 1 s
  execFileSync('python3', ['-c', 'import os, sys; os.setxattr(sys.argv[1], "user.oomd_ooms", b"1")', handle.cgroup]);
  fs.writeFileSync(path.join(handle.cgroup, 'cgroup.kill'), '1');
  await bus.killed(`/${path.relative('/sys/fs/cgroup', handle.cgroup)}`, 'memory-used');
  assert.deepEqual(await exited, [null, 'SIGKILL']);
  await collected(handle);
  assert.deepEqual(await handle.ending({ env: bus.env }), { kind: 'oomd', oomdRule: 'swap', kernelOomKills: 0, evidence: 'oomd-signal', forgeable: false });
  handle.close();
});

test('a kill of a cgroup named after another scope is never that scope\'s', async (t) => {
  if (!requireRig(t)) return;
  const bus = await oomdBus(t);
  const b = await scope.spawn('sh', ['-c', 'echo ready; read x; exit 0'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const bExit = once(b, 'exit');
  const [ready] = await once(/** @type {import('node:stream').Readable} */ (b.stdout), 'data');
  assert.equal(String(ready), 'ready\n');
  const bHandle = await scope.ScopeHandle.fromManager(String(b.scopeUnit), { env: bus.env });
  const { child: a, handle: aHandle } = await scopedBelow(String(b.scopeUnit), bus.env);
  const aExit = once(a, 'exit');
  await oomdKills(aHandle, String(b.scopeUnit), bus, 'memory-used');
  assert.deepEqual(await aExit, [null, 'SIGKILL']);
  b.stdin?.end();
  assert.deepEqual(await bExit, [0, null]);
  await collected(aHandle);
  await collected(bHandle);
  assert.deepEqual(await aHandle.ending({ env: bus.env }), { kind: 'oomd', oomdRule: 'swap', kernelOomKills: 0, evidence: 'oomd-signal', forgeable: false });
  assert.deepEqual(await bHandle.ending({ env: bus.env }), noKillAfter(bHandle));
  aHandle.close();
  bHandle.close();
});

test("a handle's waits run on the library's threads, never on libuv's pool", async (t) => {
  if (!requireRig(t)) return;
  // Eight waits of 2 s each at once, twice libuv's four threads: a file read on libuv's pool meanwhile
  // is not held up behind them.
  const children = await Promise.all(Array.from({ length: 8 }, () => scope.spawn('sleep', ['100'], { stdio: 'ignore' })));
  const handles = await Promise.all(children.map((child) => handleOnceInScope(child)));
  const waits = handles.map((handle) => handle.waitEmpty({ timeoutMs: 2000 }).then(() => 'empty', (error) => error.code));
  const started = Date.now();
  await fs.promises.readFile(__filename);
  const took = Date.now() - started;
  assert.ok(took < 500, `a file read on libuv's pool took ${took} ms beside eight waits`);
  assert.deepEqual(await Promise.all(waits), Array(8).fill('SCOPE_TIMED_OUT'));
  for (const handle of handles) {
    assert.equal((await handle.ending()).kind, 'running');
    await handle.kill();
    handle.close();
  }
});

/** Whether this process's inotify instance watches `inode` (its fdinfo lists each watch). */
function watched(/** @type {bigint} */ inode) {
  const wanted = ` ino:${inode.toString(16)} `;
  return fs.readdirSync('/proc/self/fd').some((fd) => {
    try {
      if (fs.readlinkSync(`/proc/self/fd/${fd}`) !== 'anon_inode:inotify') return false;
      return fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8').split('\n').some((line) => line.startsWith('inotify ') && line.includes(wanted));
    } catch {
      return false;
    }
  });
}

test('the last handle on an empty scope takes what watches it away; a running scope stays watched', async (t) => {
  if (!requireRig(t)) return;
  const running = await scope.spawn('sleep', ['100'], { stdio: 'ignore' });
  const first = await handleOnceInScope(running);
  const runningInode = fs.statSync(first.cgroup, { bigint: true }).ino;
  first.close();
  assert.ok(watched(runningInode), 'a running scope stays watched without a handle');
  const ran = once(running, 'exit');
  running.kill('SIGKILL');
  await ran;

  const child = await scope.spawn('sh', ['-c', 'echo ready; read x; exit 0'], { stdio: ['pipe', 'pipe', 'ignore'] });
  const handle = await handleOnceInScope(child);
  const inode = fs.statSync(handle.cgroup, { bigint: true }).ino;
  const other = scope.ScopeHandle.ofProcess(Number(child.pid));
  const [ready] = await once(readline.createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) }), 'line');
  assert.equal(ready, 'ready');
  assert.ok(watched(inode), 'the running scope is watched');
  await withManagerStopped(async () => {
    const exited = once(child, 'exit');
    child.stdin?.end();
    assert.deepEqual(await exited, [0, null]);
    while (!fs.readFileSync(path.join(handle.cgroup, 'cgroup.events'), 'utf8').includes('populated 0')) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const expected = noKill(handle);
    handle.close();
    assert.ok(watched(inode), 'another handle still asks about the scope');
    assert.deepEqual(await other.ending(), expected);
    other.close();
    assert.ok(!watched(inode), 'no handle is left on the empty scope, so no watch');
  });
});
