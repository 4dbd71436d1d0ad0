// @ts-check
'use strict';
// The library's warnings reach the Node logger: refused slices, slices without limits (R12), checks
// the manager did not answer, from any thread or worker.
const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { requireRig, scratchDir, withLines } = require('./helpers.js');

test('a refused slice warns once through the logger', async (t) => {
  if (!requireRig(t)) return;
  const config = path.join(scratchDir(t, 'test'), 'config');
  fs.writeFileSync(config, 'tool_scope_slice = noderefused.service\n');
  /** @type {Array<[string, string]>} */
  const lines = [];
  scope.setLogger((level, message) => lines.push([level, message]));
  try {
    for (let i = 0; i < 5; i++) {
      assert.equal(await scope.launcherForEnv({ env: { ...process.env, SYNAPS_CONFIG: config } }), null);
    }
  } finally {
    scope.setLogger((level, message) => console.warn(`synaps-scope: ${level}: ${message}`));
  }
  const refused = lines.filter(([level, message]) => level === 'warn' && message.includes('noderefused.service'));
  assert.equal(refused.length, 1, JSON.stringify(lines));
  assert.match(refused[0][1], /is not a slice/);
});

/**
 * An environment whose slice is `slice` and whose manager answers slice checks 5 s late (only the
 * first one, with `firstOnly`) and everything else at once: a stand-in for the rig manager's
 * private socket (tests/tools/slow_manager.py) holds back the slice check's questions. Call
 * `stop()` when done.
 * @param {import('node:test').TestContext} t
 * @param {string} slice
 * @param {boolean} firstOnly
 */
async function slowSliceCheckEnv(t, slice, firstOnly) {
  const dir = scratchDir(t, 'test');
  const config = path.join(dir, 'config');
  fs.writeFileSync(config, `tool_scope_slice = ${slice}\n`);
  fs.mkdirSync(path.join(dir, 'systemd'));
  const script = path.join(__dirname, '..', '..', '..', 'tests', 'tools', 'slow_manager.py');
  const args = [script, '--listen', path.join(dir, 'systemd', 'private'),
    '--to', path.join(String(process.env.XDG_RUNTIME_DIR), 'systemd', 'private'),
    '--needle', 'org.freedesktop.systemd1.Slice', '--delay', '5', ...(firstOnly ? ['--first-only'] : [])];
  const proxy = spawn('python3', args, { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    proxy.stdout.once('data', resolve);
    proxy.once('exit', (code) => reject(new Error(`slow_manager.py exited ${code}`)));
  });
  const stop = () => { proxy.kill('SIGKILL'); };
  // The stand-in is a relay in front of the manager: systemd-run, which would lose the launch
  // behind one, is never used there, so the launcher program is.
  return { env: { ...process.env, SYNAPS_CONFIG: config, XDG_RUNTIME_DIR: dir, SYNAPS_SCOPE_LAUNCHER: 'synaps-scope-exec' }, stop };
}

test('a slice check the busy manager did not answer asks again on its own and warns once', async (t) => {
  if (!requireRig(t)) return;
  const { env, stop } = await slowSliceCheckEnv(t, 'nodebusy.slice', true);
  t.after(stop);
  await withLines(async (lines) => {
    const warned = () => lines.filter(([level, message]) => level === 'warn' && message.includes('nodebusy.slice'));
    const started = Date.now();
    assert.ok(await scope.launcherForEnv({ env, probeTimeoutMs: 300 }));
    assert.ok(Date.now() - started < 400, 'a request waited for the check');
    // No further request: the check asks again by itself after its pause.
    const deadline = Date.now() + 10_000;
    while (warned().length === 0) {
      assert.ok(Date.now() < deadline, `the warning never came: ${JSON.stringify(lines)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    for (let i = 0; i < 5; i++) assert.ok(await scope.launcherForEnv({ env, probeTimeoutMs: 300 }));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(warned().length, 1, JSON.stringify(lines));
    assert.match(warned()[0][1], /slice nodebusy\.slice sets no limits/);
  });
});

test('flushWarnings reports a slice check without an answer', async (t) => {
  if (!requireRig(t)) return;
  const { env, stop } = await slowSliceCheckEnv(t, 'nodeflush.slice', false);
  t.after(stop);
  await withLines(async (lines) => {
    assert.ok(await scope.launcherForEnv({ env, probeTimeoutMs: 500 }));
    const started = Date.now();
    assert.equal(await scope.flushWarnings(300), false);
    assert.ok(Date.now() - started < 500, `${Date.now() - started} ms`);
    // Log lines from the library's threads reach the logger on a later turn of the loop.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const warned = lines.filter(([level, message]) => level === 'warn' && message.includes('nodeflush.slice'));
    assert.equal(warned.length, 1, JSON.stringify(lines));
    assert.match(warned[0][1], /could not check whether slice nodeflush\.slice sets any limits/);
  });
  await assert.rejects(scope.flushWarnings(-1), RangeError);
});

test('the package loaded in workers that then exit never breaks logging', (t) => {
  // Issue 13, item 4: a worker's log callback replaced the process-wide one, and the next line
  // after the worker exited aborted the process. Run in a process of its own, so an abort is seen.
  if (!requireRig(t)) return;
  const dir = scratchDir(t, 'workers');
  const script = `
    const fs = require('node:fs');
    const path = require('node:path');
    const { Worker } = require('node:worker_threads');
    const pkg = ${JSON.stringify(path.resolve(__dirname, '..'))};
    const scope = require(pkg);
    const lines = [];
    scope.setLogger((level, message) => lines.push(message));
    const config = (slice) => {
      const file = path.join(${JSON.stringify(dir)}, slice);
      fs.writeFileSync(file, 'tool_scope_slice = ' + slice + '\\n');
      return file;
    };
    const inWorker = \`
      const scope = require(\${JSON.stringify(pkg)});
      const { parentPort, workerData } = require('node:worker_threads');
      let setLoggerThrew = false;
      try { scope.setLogger(() => {}); } catch { setLoggerThrew = true; }
      scope.launcherForEnv({ env: { ...process.env, SYNAPS_CONFIG: workerData } })
        .then((launcher) => parentPort.postMessage({ direct: launcher === null, setLoggerThrew }));
    \`;
    (async () => {
      const workers = [0, 1, 2].map((i) => new Worker(inWorker, { eval: true, workerData: config('nodeworker' + i + '.service') }));
      const exited = workers.map((worker) => new Promise((resolve) => worker.on('exit', resolve)));
      const results = await Promise.all(workers.map((worker) => new Promise((resolve, reject) => {
        worker.on('message', resolve);
        worker.on('error', reject);
      })));
      await Promise.all(exited);
      // The workers are gone; the library logs again, from this thread and from its own threads.
      const launcher = await scope.launcherForEnv({ env: { ...process.env, SYNAPS_CONFIG: config('nodeworkermain.service') } });
      await new Promise((resolve) => setTimeout(resolve, 200));
      console.log(JSON.stringify({ results, direct: launcher === null, lines }));
    })();
  `;
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.signal, null, `the process died of ${run.signal}: ${run.stderr}`);
  assert.equal(run.status, 0, run.stderr);
  const { results, direct, lines } = JSON.parse(run.stdout);
  assert.deepEqual(results, [0, 1, 2].map(() => ({ direct: true, setLoggerThrew: true })));
  assert.ok(direct);
  for (const slice of ['nodeworker0', 'nodeworker1', 'nodeworker2', 'nodeworkermain']) {
    assert.equal(lines.filter((/** @type {string} */ line) => line.includes(`${slice}.service`)).length, 1, `${slice}: ${JSON.stringify(lines)}`);
  }
});

test('a slice warning reaches the logger once while other requests launch, in 20 fresh processes', async (t) => {
  // Issue 21: tracing decides a callsite's interest once per process, so each run is a new one.
  if (!requireRig(t)) return;
  const dir = scratchDir(t, 'test');
  const plain = path.join(dir, 'plain.config');
  fs.writeFileSync(plain, '');
  const host = `
    const scope = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const [slice, undefinedConfig, plainConfig] = process.argv.slice(1);
    const warned = [];
    scope.setLogger((level, message) => {
      if (level === 'warn' && message.includes(\`slice \${slice} sets no limits\`)) warned.push(message);
    });
    const launchPlain = async () => {
      for (let i = 0; i < 5; i++) {
        if (!(await scope.launcherForEnv({ env: { ...process.env, SYNAPS_CONFIG: plainConfig } }))) throw new Error('direct');
      }
    };
    (async () => {
      const others = Array.from({ length: 6 }, launchPlain);
      if (!(await scope.launcherForEnv({ env: { ...process.env, SYNAPS_CONFIG: undefinedConfig } }))) throw new Error('direct');
      await Promise.all(others);
      const deadline = Date.now() + 10_000;
      while (warned.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 300));
      console.log(warned.length);
    })();
  `;
  const counts = [];
  for (let run = 0; run < 20; run++) {
    const slice = `nodeconcurrent${run}.slice`;
    const config = path.join(dir, `${run}.config`);
    fs.writeFileSync(config, `tool_scope_slice = ${slice}\n`);
    const out = spawnSync(process.execPath, ['-e', host, slice, config, plain], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(out.status, 0, out.stderr);
    counts.push(Number(out.stdout.trim().split('\n').pop()));
  }
  assert.deepEqual(counts, Array(20).fill(1));
});

test('a blocking call\'s warning reaches the logger at once, also in a process that exits next', (t) => {
  // The lines come through the package's queue; a blocking call hands them over before it returns.
  if (!requireRig(t)) return;
  const host = `
    const scope = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const said = [];
    scope.setLogger((level, message) => said.push(message));
    const env = { ...process.env, XDG_RUNTIME_DIR: '/nonexistent' };
    delete env.DBUS_SESSION_BUS_ADDRESS;
    if (scope.launcherForEnvSync({ env }) !== null) throw new Error('scoped');
    console.log(said.filter((m) => m.includes('launching directly')).length);
  `;
  const out = spawnSync(process.execPath, ['-e', host], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(out.status, 0, out.stderr);
  assert.equal(out.stdout.trim(), '1');
});
