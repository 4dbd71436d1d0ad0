// @ts-check
'use strict';
// How a scope ended, from Node: told by a handle made while the tool ran, asked only after the
// tool's exit status is in and the manager has collected the scope, with what each answer rests on.
// The rig's cgroup2 tree has no memory controller, so an ending without evidence of a kill is
// 'unknown' here (the virtual machine shows 'on-its-own', 'kernel-oom' and the real systemd-oomd's
// kills). There is no system bus on the rig: oomd's mark (written here as oomd writes it, a
// stand-in) is the evidence, said to be forgeable.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { once } = require('node:events');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { handleOnceInScope, requireRig } = require('./helpers.js');

const stopManagerScript = path.join(__dirname, '..', '..', '..', 'tests', 'tools', 'stop_manager.py');

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
  const subtree = fs.readFileSync(path.join(path.dirname(quietHandle.cgroup), 'cgroup.subtree_control'), 'utf8');
  const [kind, evidence] = subtree.split(/\s+/).includes('memory') ? ['on-its-own', 'memory-events'] : ['unknown', 'none'];
  assert.deepEqual(await quietHandle.ending(), { kind, oomdRule: null, kernelOomKills: 0, evidence, forgeable: false });
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
