// @ts-check
'use strict';
// How a scope ended, from Node: told by a handle made while the tool ran, asked only after the
// tool's exit status is in and the manager has collected the scope. The rig's cgroup2 tree has no
// memory controller, so an ending without a mark is 'unknown' here (the virtual machine shows
// 'on-its-own', 'kernel-oom' and the real systemd-oomd's kills).
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { once } = require('node:events');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { handleOnceInScope, requireRig } = require('./helpers.js');

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
  for (const h of [handle, other]) {
    assert.deepEqual(await h.ending(), { kind: 'handle-kill', oomdRule: null, kernelOomKills: 0 });
    h.close();
  }
  await assert.rejects(handle.ending(), /closed/);
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
  assert.deepEqual(await killedHandle.ending({ timeoutMs: 2000 }), { kind: 'oomd', oomdRule: null, kernelOomKills: 0 });
  killedHandle.close();
  quiet.stdin?.end();
  assert.deepEqual(await quietExit, [3, null]);
  await collected(quietHandle);
  const subtree = fs.readFileSync(path.join(path.dirname(quietHandle.cgroup), 'cgroup.subtree_control'), 'utf8');
  const expected = subtree.split(/\s+/).includes('memory') ? 'on-its-own' : 'unknown';
  assert.deepEqual(await quietHandle.ending(), { kind: expected, oomdRule: null, kernelOomKills: 0 });
  quietHandle.close();
});
