// @ts-check
'use strict';
// A launch's resource limits from Node, against the rig's real user manager: an object of systemd's
// names and values reaches the scope's unit (read back from inside it) through spawn and a
// launcher, bad ones throw before anything runs, and a limit the manager has no controller for is
// said, listed and refused in `required` mode.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { collect, requireRig, scratchDir } = require('./helpers.js');

/** Prints the launch's own scope's properties as its manager holds them. */
const READ_BACK =
  'unit=$(grep \'^0::\' /proc/$$/cgroup); unit=${unit##*/}; ' +
  'systemctl --user show -p MemoryMax -p TasksMax -p CPUQuotaPerSecUSec -- "$unit"';
const LIMITS = { MemoryMax: '64M', TasksMax: 8, CPUQuota: '50%' };
const HELD = ['CPUQuotaPerSecUSec=500ms', 'MemoryMax=67108864', 'TasksMax=8'];

/** @param {Buffer} out */
const held = (out) => out.toString().trim().split('\n').sort();

test('spawn and a launcher give the scope its limits', async (t) => {
  if (!requireRig(t)) return;
  const child = await scope.spawn('sh', ['-c', READ_BACK], { limits: LIMITS, stdio: ['ignore', 'pipe', 'inherit'] });
  const { code, stdout } = await collect(child);
  assert.equal(code, 0);
  assert.deepEqual(held(stdout), HELD);

  const launcher = await scope.launcherForEnv();
  assert.ok(launcher);
  const limited = launcher.withLimits(LIMITS);
  assert.deepEqual(limited.limits, LIMITS);
  assert.deepEqual(launcher.limits, {});
  const { argv } = limited.wrap(['true']);
  assert.ok(argv.includes('--property=MemoryMax=64M'), argv.join(' '));
  assert.ok(!launcher.wrap(['true']).argv.some((arg) => arg.startsWith('--property')));
  limited.close();
  launcher.close();
});

test('a limit without its controller is said, and refused in required mode', async (t) => {
  if (!requireRig(t)) return;
  // The rig's cgroup tree has no memory controller.
  const launcher = scope.launcherForEnvSync({ limits: { MemoryMax: '64M' } });
  assert.ok(launcher);
  assert.equal(launcher.unenforced.length, 1);
  assert.match(launcher.unenforced[0], /^MemoryMax will not be enforced: the user manager has no memory controller/);
  launcher.close();
  const env = { ...process.env, SYNAPS_PROCESS_SCOPES: 'required' };
  await assert.rejects(scope.launcherForEnv({ env, limits: { MemoryMax: '1G' } }), (/** @type {any} */ error) => {
    assert.equal(error.name, 'ScopeRequiredError');
    assert.match(error.message, /MemoryMax will not be enforced/);
    return true;
  });
});

test('bad limits throw before anything runs', async (t) => {
  if (!requireRig(t)) return;
  const marker = path.join(scratchDir(t, 'limits'), 'ran');
  for (const [limits, name] of [
    [{ Slice: 'x.slice' }, 'ScopeError'],
    [{ MemoryMax: 'lots' }, 'ScopeError'],
    [{ TasksMax: true }, 'TypeError'],
    [{ MemoryMax: 1.5 }, 'TypeError'],
    [['MemoryMax=1G'], 'TypeError'],
  ]) {
    await assert.rejects(
      // @ts-ignore: the wrong types are the point
      scope.spawn('touch', [marker], { limits }),
      (/** @type {any} */ error) => error.name === name,
      JSON.stringify(limits),
    );
    assert.ok(!fs.existsSync(marker));
  }
  assert.throws(() => scope.checkLimits({ MemoryMax: 'lots' }), /property MemoryMax=lots is not a size/);
  scope.checkLimits({ MemoryMax: '2G', IOWeight: 100 });
});
