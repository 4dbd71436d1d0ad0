'use strict';
// Scope handles from Node as a normal user in a login session (scripts/test-session.sh), from the
// npm project that installed the package tarball. Usage: node check_session.js OTHER-USERS-PID
// A scoped tree with a setsid escapee is listed and killed through its handle, leaving this process
// alone; this process's own cgroup and another user's scope are refused (SCOPE_NOT_OURS), the latter
// with a message naming its owner.
const assert = require('node:assert/strict');
const fs = require('node:fs');

const scope = require('synaps-scope');
const other = Number(process.argv[2]);

async function main() {
  const ownBefore = fs.readFileSync('/proc/self/cgroup', 'utf8');
  const child = await scope.spawn('sh', ['-c', 'setsid sleep 300 & sleep 300 & wait'], { stdio: 'ignore' });
  assert.match(child.scopeUnit ?? '', /^synaps-tool-[0-9a-f]{32}\.scope$/);
  let handle;
  for (const deadline = Date.now() + 10_000; !handle; ) {
    try {
      handle = scope.ScopeHandle.fromPid(String(child.scopeUnit), Number(child.pid));
    } catch (error) {
      // The launcher program is still making the scope it will exec the command in.
      assert.ok(Date.now() < deadline, `the tree never reached its scope: ${error}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  const uid = process.getuid();
  assert.ok(handle.cgroup.includes(`/user@${uid}.service/app.slice/${child.scopeUnit}`), handle.cgroup);
  for (const deadline = Date.now() + 10_000; handle.pids().length < 3; ) {
    assert.ok(Date.now() < deadline, `processes in the scope: ${handle.pids()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const pids = handle.pids();
  handle.stats();
  const exited = new Promise((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  const killed = await handle.kill({ timeoutMs: 10_000 });
  assert.deepEqual([...killed].sort(), [...pids].sort());
  assert.equal(await exited, 'SIGKILL');
  assert.deepEqual(handle.pids(), []);
  handle.close();
  assert.equal(fs.readFileSync('/proc/self/cgroup', 'utf8'), ownBefore, "the caller's cgroup changed");

  const notOurs = (pattern) => (error) =>
    error instanceof scope.ScopeError && error.code === 'SCOPE_NOT_OURS' && pattern.test(error.message);
  assert.throws(() => scope.ScopeHandle.ofProcess(process.pid), notOurs(/not a synaps-<kind>-<id>\.scope/));
  let refusal = '';
  assert.throws(() => scope.ScopeHandle.ofProcess(other), (error) => {
    refusal = String(error.message);
    return notOurs(new RegExp(`belongs to uid \\d+, not to this user \\(uid ${uid}\\); refusing it`))(error);
  });
  assert.ok(fs.existsSync(`/proc/${other}`), "the other user's process was not touched");
  console.log(`Node handles: ${pids.length} processes of ${child.scopeUnit} listed and killed; refused: ${refusal}`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
