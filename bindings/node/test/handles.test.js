// @ts-check
'use strict';
// Scope handles from Node: finding, killing and reading a scope, and the scopes never touched.
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { collect, handleOnceInScope, requireRig, scratchDir } = require('./helpers.js');

test('the scope handle kills a descendant that left the process group', async (t) => {
  if (!requireRig(t)) return;
  const dir = scratchDir(t, 'test');
  const pidfile = path.join(dir, 'escaped');
  const script = `( setsid sh -c 'echo $$ > ${pidfile}; exec sleep 1000' & ); exec sleep 1000`;
  const child = await scope.spawn('sh', ['-c', script], { stdio: 'ignore', detached: true });
  const deadline = Date.now() + 10_000;
  while (!(fs.existsSync(pidfile) && fs.readFileSync(pidfile, 'utf8').endsWith('\n')) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const escaped = Number(fs.readFileSync(pidfile, 'utf8'));
  const handle = await scope.ScopeHandle.fromManager(String(child.scopeUnit));
  assert.deepEqual(handle.pids().sort(), [Number(child.pid), escaped].sort());
  const stats = handle.stats();
  assert.equal(stats.memoryCurrent === null, !fs.existsSync(path.join(handle.cgroup, 'memory.current')));
  const pressure = handle.pressure();
  for (const name of /** @type {const} */ (['memory', 'cpu', 'io'])) {
    assert.equal(pressure[name] !== null, fs.existsSync(path.join(handle.cgroup, `${name}.pressure`)), name);
  }
  assert.ok(pressure.memory && pressure.memory.full, 'memory: some and full');
  assert.ok(pressure.memory.some.avg10 >= 0 && pressure.memory.some.avg10 <= 100 && Number.isInteger(pressure.memory.some.totalUsec));
  process.kill(-Number(child.pid), 'SIGKILL');
  assert.ok(fs.existsSync(`/proc/${escaped}`), 'a process-group kill misses it');
  const killed = await handle.kill({ timeoutMs: 5000 });
  assert.ok(killed.includes(escaped), `the kill reports ${escaped}: ${killed}`);
  assert.deepEqual(handle.pids(), []);
  handle.close();
  assert.throws(() => scope.ScopeHandle.ofProcess(process.pid), (error) => error instanceof scope.ScopeError && error.code === 'SCOPE_NOT_OURS');
});

test("another user's scope is refused with a clear error, nothing in it touched", async (t) => {
  if (!requireRig(t)) return;
  // Another user's scope sits in the subtree delegated to that user, so its cgroup is that user's:
  // handed to uid 1000 here as delegation hands it (scripts/test-session.sh meets a real one).
  const child = await scope.spawn('sleep', ['1000'], { stdio: 'ignore' });
  const handle = await handleOnceInScope(child);
  fs.chownSync(handle.cgroup, 1000, -1);
  const expected = `${child.scopeUnit} belongs to uid 1000, not to this user (uid 0); refusing it`;
  const refusedWith = (/** @type {unknown} */ error) =>
    error instanceof scope.ScopeError && error.code === 'SCOPE_NOT_OURS' && error.message.includes(expected);
  assert.throws(() => scope.ScopeHandle.fromPid(String(child.scopeUnit), Number(child.pid)), refusedWith);
  assert.throws(() => scope.ScopeHandle.ofProcess(Number(child.pid)), refusedWith);
  await assert.rejects(scope.ScopeHandle.fromManager(String(child.scopeUnit)), refusedWith);
  assert.ok(fs.existsSync(`/proc/${child.pid}`), 'nothing in it was touched');
  fs.chownSync(handle.cgroup, 0, -1);
  const again = scope.ScopeHandle.ofProcess(Number(child.pid));
  const exited = new Promise((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  await again.kill({ timeoutMs: 5000 });
  assert.equal(await exited, 'SIGKILL');
  again.close();
  handle.close();
});

/** The handle of a scoped child's scope, once the child has entered it. */
test('a scope removed while it is read is empty, not an error', async (t) => {
  if (!requireRig(t)) return;
  // The manager removes a scope's cgroup once its last process dies, also between a read's open
  // and its read (ENODEV): this thread reads the scope while a worker kills it, many times over.
  for (let round = 0; round < 15; round += 1) {
    const child = await scope.spawn('sleep', ['1000'], { stdio: 'ignore' });
    t.after(() => child.kill('SIGKILL'));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const handle = await handleOnceInScope(child);
    const killing = handle.kill({ timeoutMs: 5000 });
    const end = Date.now() + 10_000;
    let reads = 0;
    while (fs.existsSync(handle.cgroup) && Date.now() < end) {
      assert.doesNotThrow(() => { handle.pids(); handle.stats(); }, `round ${round}, after ${reads} reads`);
      reads += 1;
    }
    assert.deepEqual(await killing, [child.pid], `round ${round}`);
    assert.deepEqual(handle.pids(), []);
    handle.close();
    await exited;
  }
});

test('a handle closed while its kill or wait runs is freed at once, and the call works on to its end', async (t) => {
  if (!requireRig(t)) return;
  const watched = await scope.spawn('sleep', ['1000'], { stdio: 'ignore' });
  const other = await scope.spawn('sleep', ['1000'], { stdio: 'ignore' });
  t.after(() => { watched.kill('SIGKILL'); other.kill('SIGKILL'); });
  const handle = await handleOnceInScope(watched);
  (await handleOnceInScope(other)).close();
  const waiting = handle.waitEmpty({ timeoutMs: 5000 });
  handle.close();
  assert.throws(() => handle.pids(), /closed/);
  await assert.rejects(handle.kill(), /closed/);
  // Handles of another scope, made while the wait runs, take the memory the free gave back: a wait
  // that used the freed handle would then watch that scope, which never empties.
  const others = Array.from({ length: 64 }, () => scope.ScopeHandle.fromPid(String(other.scopeUnit), Number(other.pid)));
  process.kill(Number(watched.pid), 'SIGKILL');
  await waiting;
  handle.close();
  assert.deepEqual(await others[0].kill({ timeoutMs: 5000 }), [other.pid]);
  for (const each of others) each.close();

  const killed = await scope.spawn('sleep', ['1000'], { stdio: 'ignore' });
  t.after(() => killed.kill('SIGKILL'));
  const second = await handleOnceInScope(killed);
  const killing = second.kill({ timeoutMs: 5000 });
  second.close();
  assert.deepEqual(await killing, [killed.pid]);
});

test('a scope that holds the caller is never killed', async (t) => {
  // Issue 13, item 1: a daemon in a scope of its own asks for its direct child's scope.
  if (!requireRig(t)) return;
  const script = `
    const scope = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const child = require('node:child_process').spawn('sleep', ['100']);
    try {
      scope.ScopeHandle.ofProcess(child.pid).kill(5000)
        .then(() => console.log('killed'), (error) => console.log('failed:', error.message))
        .finally(() => child.kill('SIGKILL'));
    } catch (error) {
      console.log('refused:', error.code, error.message);
      child.kill('SIGKILL');
    }
  `;
  const daemon = await scope.spawn(process.execPath, ['-e', script], { kind: 'daemon', stdio: ['ignore', 'pipe', 'inherit'] });
  const { code, stdout } = await collect(daemon);
  const out = stdout.toString();
  assert.equal(code, 0, out);
  assert.match(out, /^refused: SCOPE_NOT_OURS .*holds this process/, out);
});

test('a kill after the tool exited kills what it left in its scope', async (t) => {
  // Issue 59: a handle's kill acts on the scope, not on the tool's own process, for as long as the
  // scope exists.
  if (!requireRig(t)) return;
  const child = await scope.spawn('sh', ['-c', 'sleep 60 >/dev/null & echo $!; exit 0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const { code, stdout } = await collect(child);
  assert.equal(code, 0);
  const left = Number(stdout.toString().trim());
  assert.ok(fs.existsSync(`/proc/${left}`), 'the process the tool left runs on');
  const handle = await scope.ScopeHandle.fromManager(String(child.scopeUnit));
  assert.deepEqual(await handle.kill(), [left]);
  await handle.waitEmpty();
  assert.ok(!fs.existsSync(`/proc/${left}`) || fs.readFileSync(`/proc/${left}/stat`, 'utf8').split(') ')[1].startsWith('Z'));
  assert.equal((await handle.ending()).kind, 'handle-kill');
  handle.close();
});
