// @ts-check
'use strict';
// Under load and at teardown (issue 59), each in a host process of its own (load_host.js) whose
// death by a signal the test would see: 10,000 concurrent launcherForEnv (with the rig's manager
// and with none), handle and watch calls, and concurrent spawns, all settle with an answer or a
// ScopeError (koffi's 256 cross-thread callbacks in flight once killed the host at 1,000); and 200
// workers terminated at random points of a spawn, a wait, a kill or a watch leave the host running
// with the library's threads finished (koffi's element-wise conversion of a JS array, cut short by
// the termination, once made the call with unread elements: SIGSEGV in about one run in twenty).
// On 247 and 262; 10,000 spawns on 262 through the launcher program (each makes a real scope: 35 s
// here), 1,000 on 247, 200 through systemd-run.
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { test } = require('node:test');

const { requireRig } = require('./helpers.js');

const VERSIONS = ['247', '262'];

/** Runs load_host.js with `args` (descriptors raised to the hard limit) and returns its report. */
function host(/** @type {string[]} */ args) {
  const script = path.join(__dirname, 'load_host.js');
  const out = spawnSync('sh', ['-c', 'ulimit -n "$(ulimit -Hn)"; exec "$0" "$@"', process.execPath, script, ...args], {
    encoding: 'utf8',
    timeout: 240_000,
    maxBuffer: 64 << 20,
  });
  assert.equal(out.signal, null, `the host died of ${out.signal}: ${out.stderr.slice(-2000)}`);
  assert.equal(out.status, 0, out.stderr.slice(-2000));
  return JSON.parse(out.stdout.trim().split('\n').pop() ?? '');
}

/** Whether this rig's version runs the load tests; a skip that says why otherwise. */
function onLoadVersion(/** @type {import('node:test').TestContext} */ t) {
  if (!requireRig(t)) return false;
  if (VERSIONS.includes(String(process.env.SYNAPS_RIG_SYSTEMD_VERSION))) return true;
  t.skip(`the load tests run on systemd ${VERSIONS.join(' and ')} (the suite's time); this rig runs ${process.env.SYNAPS_RIG_SYSTEMD_VERSION}`);
  return false;
}

/** Asserts the outcomes add up to `total` and each is one of `allowed` (strings or patterns). */
function settledAs(/** @type {Record<string, number>} */ counts, /** @type {number} */ total, /** @type {RegExp} */ allowed) {
  const sum = Object.values(counts).reduce((a, b) => a + b, 0);
  assert.equal(sum, total, JSON.stringify(counts));
  for (const outcome of Object.keys(counts)) assert.match(outcome, allowed, JSON.stringify(counts));
}

test('10,000 concurrent calls of each kind settle, and the host lives', (t) => {
  if (!onLoadVersion(t)) return;
  // 10,000 scopes made at once once per run. A bare systemd-run per spawn: 1,000 at once take a
  // minute and more, and the manager refuses most (systemd-run then exits 1: nothing ran).
  const throughSystemdRun = process.env.SYNAPS_SCOPE_LAUNCHER === 'systemd-run';
  const heavy = process.env.SYNAPS_RIG_SYSTEMD_VERSION === '262' && !throughSystemdRun;
  const spawns = throughSystemdRun ? 200 : heavy ? 10_000 : 1_000;
  const report = host(['calls', String(spawns)]);
  settledAs(report.launchers, 10_000, /^(scoped|direct|SCOPE_[A-Z_0-9]+)$/);
  assert.ok((report.launchers.scoped ?? 0) > 0, JSON.stringify(report.launchers));
  assert.deepEqual(report.direct, { direct: 10_000 });
  assert.deepEqual(report.handles, { found: 2500, SCOPE_TIMED_OUT: 2500, running: 2500, 'cannot warn: no-oomd': 2500 });
  assert.equal(report.killed, 1);
  const exits = throughSystemdRun ? 'exit 0 (scoped|direct)|exit 1 scoped' : 'exit 0 (scoped|direct)';
  settledAs(report.spawned, spawns, new RegExp(`^(${exits}|SCOPE_[A-Z_0-9]+|spawn failed: E[A-Z]+)$`));
  assert.ok((report.spawned['exit 0 scoped'] ?? 0) > 0, JSON.stringify(report.spawned));
});

test('200 workers terminated mid-spawn, mid-wait, mid-kill or mid-watch leave the host running and no thread behind', (t) => {
  if (!onLoadVersion(t)) return;
  const report = host(['workers', '200']);
  assert.equal(report.at.loading + report.at.started, 200);
  assert.ok(report.at.started > 100, JSON.stringify(report.at));
  // The library's one watching thread may have started meanwhile; every request's thread ended.
  assert.ok(report.after.threads <= report.before.threads + 1, JSON.stringify(report));
  assert.ok(report.after.fds <= report.before.fds + 2, JSON.stringify(report));
});
