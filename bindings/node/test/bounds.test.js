// @ts-check
'use strict';
// Bounds and bad input from Node: no request holds the event loop or a caller past its bound, memory
// stays flat, and bad input throws a clear error.
const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const { test } = require('node:test');

const scope = require('..');
const { Manager, noBusEnv, requireRig } = require('./helpers.js');

test('required mode rejects with a typed error', async (t) => {
  if (!requireRig(t)) return;
  const env = { ...noBusEnv(), SYNAPS_PROCESS_SCOPES: 'required' };
  await assert.rejects(scope.launcherForEnv({ env }), (error) => {
    assert.ok(error instanceof scope.ScopeRequiredError);
    assert.ok(error instanceof scope.ScopeError);
    assert.equal(error.code, 'SCOPE_REQUIRED_UNAVAILABLE');
    assert.match(error.message, /required but unavailable.*XDG_RUNTIME_DIR/);
    return true;
  });
  assert.throws(() => scope.launcherForEnvSync({ env }), scope.ScopeRequiredError);
  await assert.rejects(scope.spawn('true', [], { env }), scope.ScopeRequiredError);
});

test('the event loop keeps ticking while 20 launches probe a stopped manager', async (t) => {
  if (!requireRig(t)) return;
  const manager = await new Manager().ready();
  try {
    assert.ok(await scope.launcherForEnv({ env: manager.env }), 'the manager answers while running');
    manager.signal('SIGSTOP');
    let last = performance.now();
    let worst = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      worst = Math.max(worst, now - last);
      last = now;
    }, 10);
    const started = performance.now();
    const launchers = await Promise.all(
      Array.from({ length: 20 }, () => scope.launcherForEnv({ env: manager.env, probeTimeoutMs: 300 })),
    );
    clearInterval(ticker);
    assert.deepEqual(launchers, Array(20).fill(null), 'a stopped manager means direct launches');
    assert.ok(performance.now() - started >= 300, 'the probes did wait for the bound');
    assert.ok(worst < 100, `the event loop stalled for ${worst.toFixed(0)} ms`);
  } finally {
    manager.close();
  }
});

test('1,000 wraps do not grow the RSS by 10 MB', async (t) => {
  if (!requireRig(t)) return;
  const launcher = scope.launcherForEnvSync();
  assert.ok(launcher);
  const argv = ['sh', '-c', 'exit 0', 'x'.repeat(1000)];
  for (let i = 0; i < 200; i++) launcher.wrap(argv);
  globalThis.gc?.();
  const before = process.memoryUsage().rss;
  for (let i = 0; i < 1000; i++) {
    const wrapped = launcher.wrap(argv);
    assert.ok(wrapped.unit);
  }
  globalThis.gc?.();
  const grown = process.memoryUsage().rss - before;
  launcher.close();
  assert.ok(grown < 10 * 1024 * 1024, `RSS grew by ${(grown / 1048576).toFixed(1)} MB`);
});

test('64 requests against a stopped manager each settle within their own bound', async (t) => {
  if (!requireRig(t)) return;
  const manager = await new Manager().ready();
  try {
    assert.ok(await scope.launcherForEnv({ env: manager.env }));
    manager.signal('SIGSTOP');
    const bound = 500;
    const one = async () => {
      const started = performance.now();
      const launcher = await scope.launcherForEnv({ env: manager.env, probeTimeoutMs: bound });
      assert.equal(launcher, null);
      return performance.now() - started;
    };
    const took = await Promise.all(Array.from({ length: 64 }, one));
    assert.ok(Math.max(...took) < bound + 100, `slowest ${Math.max(...took).toFixed(0)} ms`);
  } finally {
    manager.close();
  }
});

test('bad input throws a clear error', async (t) => {
  if (!requireRig(t)) return;
  const launcher = scope.launcherForEnvSync();
  assert.ok(launcher);
  assert.deepEqual(launcher.wrap([]), { argv: [], argvBuffers: [], unit: null }, 'left unwrapped, as an unresolvable program is (R4)');
  // @ts-expect-error: not an array
  assert.throws(() => launcher.wrap('ls -l'), TypeError);
  // @ts-expect-error: not a string
  assert.throws(() => launcher.wrap(['ls', 3]), /argv\[1\] must be a string/);
  // @ts-expect-error: not a string
  assert.throws(() => launcher.wrap(['ls', Buffer.from('x')]), TypeError);
  assert.throws(() => launcher.wrap(['ls', 'a\0b']), /NUL/);
  // Values the library's intake refuses, with its class and words (tests/cases/bad_input.json has
  // every such case, run by intake_table.test.js).
  const invalid = (/** @type {RegExp} */ message) => ({ name: 'ScopeError', code: 'SCOPE_INVALID_ARGUMENT', message });
  assert.throws(() => launcher.wrap(['ls'], { env: { '': 'x' } }), invalid(/its key is empty/));
  assert.throws(() => launcher.wrap(['ls'], { env: { 'A=B': 'x' } }), invalid(/its key contains '='/));
  await assert.rejects(scope.launcherForEnv({ env: { 'A=B': 'x' } }), invalid(/its key contains '='/));
  assert.throws(() => launcher.wrap(['ls'], { cwd: '/tmp\0x' }), /NUL/);
  // @ts-expect-error: not a kind
  await assert.rejects(scope.launcherForEnv({ kind: 'shell' }), { name: 'ScopeError', code: 'SCOPE_INVALID_KIND', message: /unknown scope kind "shell"/ });
  await assert.rejects(scope.launcherForEnv({ probeTimeoutMs: 0 }), invalid(/probe_timeout_ms is 0 ms/));
  // Numbers a C uint32_t cannot hold, refused before the call.
  for (const probeTimeoutMs of [-1, 1.5, 2 ** 40, NaN, Infinity]) {
    await assert.rejects(scope.launcherForEnv({ probeTimeoutMs }), RangeError, String(probeTimeoutMs));
  }
  // @ts-expect-error: not a number
  await assert.rejects(scope.launcherForEnv({ probeTimeoutMs: '300' }), TypeError);
  assert.throws(() => launcher.wrap(['ls'], { env: { A: 'x\0y' } }), /NUL/);
  assert.throws(() => launcher.wrap(['ls'], { argv0: 'l\0s' }), /NUL/);
  assert.throws(() => scope.resolveProgram('synaps-no-such-program'), { code: 'ENOENT' });
  assert.equal(scope.resolveProgram('sh'), execFileSync('sh', ['-c', 'command -v sh'], { encoding: 'utf8' }).trim());
  assert.throws(() => scope.setLogLevel(/** @type {any} */ ('loud')), TypeError);
  launcher.close();
});

test('pids are whole numbers from 1 to 2^31 - 1 on every entry point', () => {
  // Issue 13, item 6: koffi would turn 1.5 into pid 1 and 2^32 + N into pid N.
  const unit = 'synaps-tool-0123456789abcdef0123456789abcdef.scope';
  const entryPoints = [(/** @type {any} */ pid) => scope.ScopeHandle.ofProcess(pid), (/** @type {any} */ pid) => scope.ScopeHandle.fromPid(unit, pid)];
  for (const call of entryPoints) {
    // Numbers a C uint32_t cannot hold, refused by the binding before the call.
    for (const pid of [1.5, 2 ** 32 + 1, -1, NaN, Infinity]) {
      assert.throws(() => call(pid), { name: 'RangeError', message: /pid must be a whole number a uint32_t can hold/ }, String(pid));
    }
    // Numbers it can hold that are no pid, refused by the library's own rule.
    for (const pid of [0, 2 ** 31, 2 ** 32 - 1]) {
      assert.throws(
        () => call(pid),
        { name: 'ScopeError', code: 'SCOPE_INVALID_ARGUMENT', message: new RegExp(`pid must be a whole number from 1 to 2147483647, not ${pid}`) },
        String(pid),
      );
    }
    for (const pid of ['5', null, undefined, 5n, { valueOf: () => 5 }]) {
      assert.throws(() => call(pid), { name: 'TypeError', message: /pid must be a number/ }, String(pid));
    }
  }
});
