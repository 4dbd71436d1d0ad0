// @ts-check
'use strict';
// Launches from Node against the rig's real user manager: scoped children, their argv and program,
// direct launches and why.
const assert = require('node:assert/strict');
const { execFileSync, spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { CGROUP_OF_SELF, collect, handleOnceInScope, Manager, noBusEnv, PRINT_ARGS, requireRig, scratchDir, withLines } = require('./helpers.js');

test('a spawned child runs in its own scope', async (t) => {
  if (!requireRig(t)) return;
  const child = await scope.spawn('sh', ['-c', `${CGROUP_OF_SELF}; echo $$`], { stdio: ['ignore', 'pipe', 'inherit'] });
  const { code, stdout } = await collect(child);
  assert.equal(code, 0);
  assert.match(String(child.scopeUnit), /^synaps-tool-[0-9a-f]{32}\.scope$/);
  const [cgroup, pid] = stdout.toString().trim().split('\n');
  assert.ok(cgroup.endsWith(`/app.slice/${child.scopeUnit}`), cgroup);
  assert.equal(Number(pid), child.pid, 'the pid Node knows is the command\'s pid');
});

test('a shell command runs in its own scope, its words joined as child_process joins them', async (t) => {
  if (!requireRig(t)) return;
  // Joined, `test a = a` is one command; handed over as $0 $1 $2 it would be `test` alone (exit 1).
  const child = await scope.spawn('test', ['a', '=', 'a', '&&', CGROUP_OF_SELF], { shell: true, stdio: ['ignore', 'pipe', 'inherit'] });
  const { code, stdout } = await collect(child);
  assert.equal(code, 0);
  assert.match(String(child.scopeUnit), /^synaps-tool-[0-9a-f]{32}\.scope$/);
  assert.ok(stdout.toString().trim().endsWith(`/${child.scopeUnit}`), stdout.toString());
  const launcher = await scope.launcherForEnv();
  assert.ok(launcher);
  const wrapped = launcher.wrapShell(['echo', 'a b'], { shell: '/bin/bash' });
  assert.deepEqual(wrapped.argv.slice(-3), ['/bin/bash', '-c', 'echo a b']);
  assert.match(String(wrapped.unit), /^synaps-tool-/);
  launcher.close();
});

test('the rig sets no LD_LIBRARY_PATH, and a scoped child loads the host\'s libc', async (t) => {
  if (!requireRig(t)) return;
  assert.equal(process.env.LD_LIBRARY_PATH, undefined);
  const child = await scope.spawn('sh', ['-c', 'env; echo ---; cat /proc/$$/maps'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const { code, stdout } = await collect(child);
  assert.equal(code, 0);
  assert.ok(child.scopeUnit);
  const [childEnv, maps] = stdout.toString().split('---\n');
  assert.ok(!childEnv.split('\n').some((line) => line.startsWith('LD_LIBRARY_PATH=')), childEnv);
  const loaded = new Set(maps.split('\n').map((line) => line.split(/\s+/)[5]).filter((f) => f && f.includes('libc.so')));
  assert.ok(loaded.size > 0 && [...loaded].every((f) => f.startsWith('/usr/lib/')), [...loaded].join(' '));
});

test('the launcher says what it uses, and wrap passes ${HOME} and unicode verbatim', async (t) => {
  if (!requireRig(t)) return;
  const launcher = await scope.launcherForEnv({ kind: 'daemon' });
  assert.ok(launcher);
  assert.equal(launcher.kind, 'daemon');
  assert.equal(launcher.slice, null);
  const asked = process.env.SYNAPS_SCOPE_LAUNCHER ?? 'auto';
  if (asked !== 'auto') assert.equal(launcher.wrapper, asked);
  assert.equal(
    launcher.systemdVersion,
    launcher.wrapper === 'systemd-run' ? Number(process.env.SYNAPS_RIG_SYSTEMD_VERSION) : null,
  );
  const payload = ['${HOME}', '$HOME', 'ünïcødé ✓ 日本', '', '--', '-h', 'a "quoted" \\ arg'];
  const wrapped = launcher.wrap(['sh', '-c', PRINT_ARGS, 'sh', ...payload]);
  assert.match(String(wrapped.unit), /^synaps-daemon-/);
  assert.deepEqual(wrapped.argv.slice(-payload.length), payload);
  assert.equal(wrapped.argv.includes('--expand-environment=no'), (launcher.systemdVersion ?? 0) >= 254);
  const run = spawnSync(wrapped.argv[0], wrapped.argv.slice(1));
  assert.equal(run.status, 0);
  assert.deepEqual(run.stdout.toString('utf8').split('\0').slice(0, -1), payload);

  assert.deepEqual(wrapped.argvBuffers.at(-5), Buffer.from('ünïcødé ✓ 日本', 'utf8'), 'the bytes of the UTF-8 argument');
  launcher.close();
  assert.throws(() => launcher.wrap(['true']), /closed/);
  launcher.close();
});

test('no manager means a direct launch', async (t) => {
  if (!requireRig(t)) return;
  const env = noBusEnv();
  assert.equal(await scope.launcherForEnv({ env }), null);
  assert.equal(scope.launcherForEnvSync({ env }), null);
  const child = await scope.spawn('sh', ['-c', CGROUP_OF_SELF], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const { code, stdout } = await collect(child);
  assert.equal(code, 0);
  assert.equal(child.scopeUnit, null);
  assert.ok(!stdout.toString().includes('.scope'));
});

test('a child that switches user runs directly with one warning', async (t) => {
  // Issue 13, item 3: a scope of this user's manager cannot hold another user's process.
  if (!requireRig(t)) return;
  await withLines(async (lines) => {
    for (const ids of [{ uid: 65534 }, { gid: 65534 }, { uid: 65534, gid: 65534 }]) {
      const child = await scope.spawn('sh', ['-c', `id -u; id -g; ${CGROUP_OF_SELF}`], { ...ids, cwd: '/', stdio: ['ignore', 'pipe', 'inherit'] });
      assert.equal(child.scopeUnit, null);
      const { code, stdout } = await collect(child);
      assert.equal(code, 0);
      const [uid, gid, cgroup] = stdout.toString().split('\n');
      assert.equal(uid, ids.uid === undefined ? '0' : '65534');
      assert.equal(gid, ids.gid === undefined ? '0' : '65534');
      assert.doesNotMatch(cgroup, /synaps-tool-/);
    }
    const warned = lines.filter(([level, message]) => level === 'warn' && message.includes('switches user'));
    assert.equal(warned.length, 1, JSON.stringify(lines));
    assert.match(warned[0][1], /cannot hold another user's process/);
  });
  const env = { ...process.env, SYNAPS_PROCESS_SCOPES: 'required' };
  await assert.rejects(scope.spawn('true', [], { env, uid: 65534 }), (error) => {
    assert.ok(error instanceof scope.ScopeRequiredError);
    assert.match(error.message, /switches user/);
    return true;
  });
  const launcher = await scope.launcherForEnv({ env });
  assert.equal(launcher?.required, true);
  launcher?.close();
});

test('a program whose path holds newlines runs once in its scope, nothing of it in the unit file', async (t) => {
  // Issue 13: after a daemon-reload the scope still has no MemoryMax.
  if (!requireRig(t)) return;
  const dir = scratchDir(t, 'test');
  const log = path.join(dir, 'ran');
  const program = path.join(dir, 'a\nMemoryMax=4096\nb.sh');
  const unitOfSelf = '$(basename "$(grep \'^0::\' /proc/$$/cgroup | cut -c4-)")';
  fs.writeFileSync(
    program,
    `#!/bin/sh\necho ran >> '${log}'\nsystemctl --user daemon-reload\nsystemctl --user show -p MemoryMax --value -- "${unitOfSelf}" >> '${log}'\n`,
    { mode: 0o755 },
  );
  const child = await scope.spawn(program, [], { stdio: 'ignore' });
  assert.ok(child.scopeUnit);
  assert.equal((await collect(child)).code, 0);
  assert.equal(fs.readFileSync(log, 'utf8'), 'ran\ninfinity\n');
});

test('a script without a shebang fails scoped as it does direct', async (t) => {
  // Issue 13, item 14: the same outcome as child_process.spawn, never a run through /bin/sh.
  if (!requireRig(t)) return;
  const dir = scratchDir(t, 'test');
  const log = path.join(dir, 'ran');
  const bare = path.join(dir, 'bare');
  fs.writeFileSync(bare, `echo ran >> '${log}'\n`, { mode: 0o755 });
  /** @param {import('node:child_process').ChildProcess} child */
  const outcome = (child) =>
    new Promise((resolve) => {
      child.on('error', (error) => resolve(`error ${/** @type {NodeJS.ErrnoException} */ (error).code}`));
      child.on('exit', (code) => resolve(`exit ${code}`));
    });
  const direct = await outcome(require('node:child_process').spawn(bare, [], { stdio: 'ignore' }));
  const child = await scope.spawn(bare, [], { stdio: 'ignore' });
  const scoped = await outcome(child);
  assert.equal(scoped, direct);
  assert.equal(child.scopeUnit, null);
  assert.equal(fs.existsSync(log), direct === 'exit 0');
});

test('a login shell gets its -sh argv0 through spawn({argv0})', async (t) => {
  if (!requireRig(t)) return;
  const child = await scope.spawn('sh', ['-c', 'printf %s "$0"'], { argv0: '-sh', stdio: ['ignore', 'pipe', 'inherit'] });
  const { code, stdout } = await collect(child);
  assert.equal(code, 0);
  assert.ok(child.scopeUnit);
  const launcher = scope.launcherForEnvSync();
  assert.ok(launcher);
  if (launcher.wrapper === 'synaps-scope-exec') assert.equal(stdout.toString(), '-sh');
  else assert.ok(stdout.toString().startsWith('/'), 'systemd-run passes the program\'s path as argv[0]');
  launcher.close();
});

test('from a pid namespace a launch is scoped, or direct with the reason under systemd-run', (t) => {
  if (!requireRig(t)) return;
  // A sandbox's `unshare --pid`: the manager is outside it. The launcher program names its process
  // by a pidfd and is scoped where the manager takes one (systemd 257 on), else the launch is direct
  // and the warning says why; systemd-run cannot reach the manager from there, so the launch is
  // direct and the warning (the library's default sink, stderr) says why.
  const { unit, cgroup, stderr } = spawnInAPidNamespace(process.env);
  if (process.env.SYNAPS_SCOPE_LAUNCHER === 'systemd-run') {
    assert.equal(unit, 'null');
    assert.ok(!cgroup.includes('.scope'), cgroup);
    assert.match(stderr, /synaps-scope: warn: .*pid namespace/);
  } else if (Number(process.env.SYNAPS_RIG_SYSTEMD_VERSION) < 257) {
    assert.equal(unit, 'null');
    assert.ok(!cgroup.includes('synaps-tool-'), cgroup);
    assert.match(stderr, /synaps-scope: warn: .*takes no pidfd/);
  } else {
    assert.match(unit, /^synaps-tool-[0-9a-f]{32}\.scope$/);
    assert.ok(cgroup.endsWith(`/${unit}`), cgroup);
    assert.equal(stderr, '');
  }
});

/**
 * A child of `scope.spawn` that prints its cgroup, made from a pid namespace of its own
 * (`unshare --pid`) with `env`: its scope unit ('null' for none), the cgroup it ran in, and what
 * the parent said on stderr (the library's default sink).
 * @param {Record<string, string | undefined>} env
 */
function spawnInAPidNamespace(env) {
  const script = `
    const scope = require(${JSON.stringify(path.join(__dirname, '..'))});
    scope.spawn('sh', ['-c', ${JSON.stringify(CGROUP_OF_SELF)}], { stdio: ['ignore', 'pipe', 'inherit'] }).then((child) => {
      let out = '';
      child.stdout.on('data', (d) => { out += d; });
      child.on('close', (code) => console.log(String(child.scopeUnit), out.trim(), code));
    });`;
  const run = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', '--', process.execPath, '-e', script], { encoding: 'utf8', timeout: 60000, env });
  assert.equal(run.status, 0, run.stderr);
  const [unit, cgroup, code] = run.stdout.trim().split(' ');
  assert.equal(code, '0');
  return { unit, cgroup, stderr: run.stderr };
}

test('from a pid namespace with the session bus alone a pidfd names the launch, or it is direct with the reason', async (t) => {
  if (!requireRig(t)) return;
  // The broker is outside the namespace and there is no private socket: "the sender" cannot be
  // told from a proxy's, so a manager that takes a pidfd (systemd 257 on) is sent one and the child
  // is scoped; before 257 the launch is direct and the warning says why.
  const manager = await new Manager().ready();
  t.after(() => manager.close());
  execFileSync('systemctl', ['--user', 'start', 'dbus.socket', 'dbus.service'], { env: manager.env });
  /** @type {Record<string, string | undefined>} */
  const env = { ...manager.env, SYNAPS_SCOPE_LAUNCHER: 'synaps-scope-exec', DBUS_SESSION_BUS_ADDRESS: `unix:path=${manager.runtimeDir}/bus` };
  delete env.XDG_RUNTIME_DIR;
  const { unit, cgroup, stderr } = spawnInAPidNamespace(env);
  if (Number(process.env.SYNAPS_RIG_SYSTEMD_VERSION) >= 257) {
    assert.match(unit, /^synaps-tool-[0-9a-f]{32}\.scope$/);
    assert.ok(cgroup.endsWith(`/${unit}`), cgroup);
    assert.equal(stderr, '');
  } else {
    assert.equal(unit, 'null');
    assert.ok(!cgroup.includes('synaps-tool-'), cgroup);
    assert.match(stderr, /synaps-scope: warn: .*takes no pidfd/);
  }
});

test('a session bus where a program that is no manager owns its name is passed over for the private socket', async (t) => {
  if (!requireRig(t)) return;
  // One manager for one environment: the launch, its probe and ScopeHandle.fromManager reach the
  // manager of XDG_RUNTIME_DIR by its private socket, and doctor says why the bus was passed over;
  // with the session bus alone there is no scope.
  const dir = scratchDir(t, 'squatted-bus');
  const address = `unix:path=${path.join(dir, 'bus')}`;
  const daemon = spawn('dbus-daemon', ['--session', '--nofork', '--nopidfile', `--address=${address}`], { stdio: 'ignore' });
  t.after(() => daemon.kill('SIGKILL'));
  const deadline = Date.now() + 10_000;
  while (!fs.existsSync(path.join(dir, 'bus'))) {
    assert.ok(Date.now() < deadline, 'dbus-daemon made no socket in 10 s');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const squatterScript = path.join(__dirname, '..', '..', '..', 'tests', 'tools', 'name_squatter.py');
  const squatter = spawn('python3', [squatterScript, address], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => squatter.kill('SIGKILL'));
  const said = /** @type {import('node:stream').Readable} */ (squatter.stdout);
  const ready = await new Promise((resolve) => said.once('data', (d) => resolve(String(d).trim())));
  assert.equal(ready, 'ready');
  /** @type {Record<string, string | undefined>} */
  const env = { ...process.env, DBUS_SESSION_BUS_ADDRESS: address };
  if (process.env.SYNAPS_SCOPE_LAUNCHER !== 'systemd-run') {
    const report = await scope.doctor({ env });
    assert.match(report, /does not answer as a systemd manager/);
  }
  const child = await scope.spawn('sleep', ['30'], { env, stdio: 'ignore' });
  const inScope = await handleOnceInScope(child);
  const found = await scope.ScopeHandle.fromManager(String(child.scopeUnit), { env });
  assert.equal(found.cgroup, inScope.cgroup);
  assert.deepEqual(found.pids(), [Number(child.pid)]);
  child.kill('SIGKILL');
  const busOnly = { ...env };
  delete busOnly.XDG_RUNTIME_DIR;
  assert.equal(await scope.launcherForEnv({ env: busOnly }), null);
});

test('a wrapped argv spawned twice leaves the first tool running in its scope', async (t) => {
  // A host that keeps its wrapped line and spawns it again names one unit twice: the second launch
  // never ends the first tool. Through the launcher program the second command runs once unscoped
  // (on) or not at all with 125 (required); systemd-run refuses the taken name.
  if (!requireRig(t)) return;
  const modes = process.env.SYNAPS_SCOPE_LAUNCHER === 'systemd-run' ? ['on'] : ['on', 'required'];
  const dir = scratchDir(t, 'taken-name');
  for (const mode of modes) {
    const runs = path.join(dir, `runs-${mode}`);
    const quick = path.join(dir, `quick-${mode}`);
    const launcher = await scope.launcherForEnv({ env: { ...process.env, SYNAPS_PROCESS_SCOPES: mode } });
    assert.ok(launcher);
    // Told to end at once only before it begins: the first, told after it recorded itself, sleeps on.
    const wrapped = launcher.wrap(['sh', '-c', `[ -e '${quick}' ]; q=$?; ${CGROUP_OF_SELF} >> '${runs}'; [ $q = 0 ] || exec sleep 60`]);
    const unit = String(wrapped.unit);
    const first = spawn(wrapped.argv[0], wrapped.argv.slice(1), { stdio: 'ignore' });
    const firstEnded = new Promise((resolve) => first.on('exit', resolve));
    try {
      const lineWritten = () => fs.existsSync(runs) && fs.readFileSync(runs, 'utf8').endsWith('\n');
      for (let i = 0; i < 2000 && !lineWritten(); i++) await new Promise((r) => setTimeout(r, 5));
      assert.ok(fs.readFileSync(runs, 'utf8').trim().endsWith(`/${unit}`));
      fs.writeFileSync(quick, '');
      const second = spawnSync(wrapped.argv[0], wrapped.argv.slice(1), { encoding: 'utf8', timeout: 30000 });
      assert.equal(first.exitCode, null, `${mode}: the first tool was ended: ${second.stderr}`);
      assert.equal(first.signalCode, null, `${mode}: the first tool was killed: ${second.stderr}`);
      const own = fs.readFileSync(`/proc/${first.pid}/cgroup`, 'utf8').split('\n').find((l) => l.startsWith('0::'));
      assert.ok(String(own).endsWith(`/${unit}`), String(own));
      const lines = fs.readFileSync(runs, 'utf8').trim().split('\n');
      if (launcher.wrapper === 'systemd-run') {
        assert.deepEqual([second.status, lines.length], [1, 1], second.stderr);
        assert.ok(second.stderr.includes(unit), second.stderr);
      } else if (mode === 'on') {
        assert.deepEqual([second.status, lines.length], [0, 2], second.stderr);
        assert.ok(!lines[1].endsWith(unit), lines[1]);
        assert.ok(second.stderr.includes(`already has a unit named ${unit}`), second.stderr);
      } else {
        assert.deepEqual([second.status, lines.length], [scope.EXEC_FAILED_STATUS, 1], second.stderr);
      }
    } finally {
      first.kill('SIGKILL');
      await firstEnded;
      launcher.close();
    }
  }
});

for (const passFds of [false, true]) {
  test(`systemd-run behind a relay${passFds ? ' that passes descriptors' : ''} is not used`, async (t) => {
    if (!requireRig(t)) return;
    // It would make the scope, then fail to find it as the sender's (the relay's) unit and never run
    // the command: no launcher, and `required` rejects with the reason.
    const dir = scratchDir(t, 'relayed');
    fs.mkdirSync(path.join(dir, 'systemd'));
    const socket = path.join(dir, 'relayed');
    const target = path.join(process.env.XDG_RUNTIME_DIR ?? '', 'systemd', 'private');
    const relayTool = path.join(__dirname, '..', '..', '..', 'tests', 'tools', 'bus_relay.py');
    const relay = spawn('python3', [relayTool, ...(passFds ? ['--pass-fds'] : []), socket, target], { stdio: ['ignore', 'pipe', 'inherit'] });
    t.after(() => relay.kill());
    await new Promise((resolve) => relay.stdout.once('data', resolve));
    fs.symlinkSync(socket, path.join(dir, 'systemd', 'private'));
    /** @type {Record<string, string | undefined>} */
    const env = { ...process.env, XDG_RUNTIME_DIR: dir, SYNAPS_SCOPE_LAUNCHER: 'systemd-run' };
    delete env.DBUS_SESSION_BUS_ADDRESS;
    assert.equal(await scope.launcherForEnv({ env }), null);
    await assert.rejects(scope.launcherForEnv({ env: { ...env, SYNAPS_PROCESS_SCOPES: 'required' } }), /never running the command/);
  });
}
