// @ts-check
'use strict';
// A burst of launches stays scoped (issue 22): 256 scope.spawn() at once from one Node process on
// a healthy manager with the default bound, each command recording the cgroup it starts in.
// Every one runs exactly once, in its own scope from its first instruction. And 16 at once with a
// 1 s bound while the session bus's broker is stopped: all scoped.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { Manager, collect, requireRig, scratchDir } = require('./helpers.js');

const LAUNCHES = 256;
// One shell and its builtins: a grep and a cut in a subshell for each of 256 took a third of two
// cores' CPU, which the launches' turns then lacked.
const RECORD =
  'while IFS= read -r line; do case $line in 0::*) ' +
  'printf "%s %s\\n" "$0" "${line#0::}" >> "$1";; esac; done < /proc/$$/cgroup';

/**
 * `launches` scope.spawn() at once with `env` and `probeTimeoutMs`: each command runs once, in its
 * own scope from its first instruction. How long the last took, in seconds.
 * @param {number} launches
 * @param {Record<string, string | undefined>} env
 * @param {string} log
 * @param {number} probeTimeoutMs
 */
async function allScopedAtOnce(launches, env, log, probeTimeoutMs) {
  const started = Date.now();
  // Each child is collected as soon as it is spawned: an early one may end before the last spawns.
  const results = await Promise.all(
    Array.from({ length: launches }, async (_, n) => {
      const child = await scope.spawn('sh', ['-c', RECORD, String(n), log], { env, probeTimeoutMs, stdio: ['ignore', 'pipe', 'inherit'] });
      const { code } = await collect(child);
      return { code, unit: child.scopeUnit };
    }),
  );
  const took = (Date.now() - started) / 1000;
  const units = results.map(({ code, unit }, n) => {
    assert.equal(code, 0, `launch ${n}`);
    assert.match(String(unit), /^synaps-tool-[0-9a-f]{32}\.scope$/, `launch ${n} went direct`);
    return String(unit);
  });
  const lines = fs.readFileSync(log, 'utf8').trim().split('\n').map((line) => line.split(' '));
  /** @type {Map<string, number>} */
  const runs = new Map();
  for (const [n] of lines) runs.set(n, (runs.get(n) ?? 0) + 1);
  assert.deepEqual(
    [...runs.entries()].filter(([, count]) => count !== 1),
    [],
    'no command runs twice',
  );
  assert.equal(runs.size, launches, 'every command ran');
  const unscoped = lines.filter(([n, cgroup]) => !cgroup.endsWith(`/${units[Number(n)]}`));
  assert.deepEqual(unscoped.slice(0, 3), [], `${unscoped.length} started outside their scope`);
  return took;
}

test('256 spawns at once each start in their own scope, once', async (t) => {
  if (!requireRig(t)) return;
  const dir = scratchDir(t, 'burst');
  const env = { ...process.env, SYNAPS_SCOPE_LAUNCHER: 'synaps-scope-exec' };
  const took = await allScopedAtOnce(LAUNCHES, env, path.join(dir, 'burst.log'), 3000);
  t.diagnostic(`${LAUNCHES} spawns at once: all scoped, last exit after ${took.toFixed(2)} s`);
});

test('a stopped session bus broker costs 16 spawns at once with a 1 s bound one wait: all scoped', async (t) => {
  if (!requireRig(t)) return;
  // The first launch to find the broker silent marks the runtime directory; the rest take the
  // manager's private socket at once (issue 38).
  const dir = scratchDir(t, 'stalled-broker');
  const manager = await new Manager().ready();
  try {
    execFileSync('systemctl', ['--user', 'start', 'dbus.socket', 'dbus.service'], { env: manager.env });
    const broker = Number(
      execFileSync('systemctl', ['--user', 'show', '-p', 'MainPID', '--value', 'dbus.service'], { env: manager.env, encoding: 'utf8' }).trim(),
    );
    assert.ok(broker > 0, "the session bus's broker runs");
    const env = { ...manager.env, SYNAPS_SCOPE_LAUNCHER: 'synaps-scope-exec', DBUS_SESSION_BUS_ADDRESS: `unix:path=${manager.runtimeDir}/bus` };
    process.kill(broker, 'SIGSTOP');
    try {
      const took = await allScopedAtOnce(16, env, path.join(dir, 'burst.log'), 1000);
      t.diagnostic(`16 spawns at once, the broker stopped, 1 s bound: all scoped, last exit after ${took.toFixed(2)} s`);
    } finally {
      process.kill(broker, 'SIGCONT');
    }
  } finally {
    manager.close();
  }
});
