// @ts-check
'use strict';
// A turn is held until its holder lets it go, from Node (issue 48): while a request of this
// process holds its turn (its first authentication held 600 ms by a stand-in in front of the
// manager, tests/tools/slow_manager.py), this process opens and closes every file of the runtime
// directory, or makes a request that spells the directory with a slash more, or through a
// symlink; another process's request must still wait for the held turn.
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { requireRig, scratchDir } = require('./helpers.js');

const HELD_MS = 600;

/** Another process's request: exits 0 when scoped. */
const OTHER = `const scope = require(${JSON.stringify(path.join(__dirname, '..'))});
process.exit(scope.launcherForEnvSync({ env: process.env, probeTimeoutMs: 3000 }) ? 0 : 1);`;

/** @type {Record<string, (env: NodeJS.ProcessEnv, runtime: string) => Promise<unknown>>} */
const CASES = {
  'nothing else': async () => {},
  'the host closes every file of the directory': async (_env, runtime) => {
    for (const name of fs.readdirSync(runtime)) {
      const file = path.join(runtime, name);
      if (fs.statSync(file).isFile()) fs.closeSync(fs.openSync(file, 'r'));
    }
  },
  'a request that spells the directory with a slash more': (env, runtime) =>
    scope.launcherForEnv({ env: { ...env, XDG_RUNTIME_DIR: `${runtime}/` }, probeTimeoutMs: 150 }),
  'a request through a symlink to the directory': (env, runtime) => {
    const link = path.join(path.dirname(runtime), 'link');
    fs.symlinkSync(runtime, link);
    return scope.launcherForEnv({ env: { ...env, XDG_RUNTIME_DIR: link }, probeTimeoutMs: 150 });
  },
};

for (const [name, meanwhile] of Object.entries(CASES)) {
  test(`a held turn is waited for: ${name}`, async (t) => {
    if (!requireRig(t)) return;
    const runtime = path.join(scratchDir(t, 'turns'), 'runtime');
    fs.mkdirSync(path.join(runtime, 'systemd'), { recursive: true });
    const script = path.join(__dirname, '..', '..', '..', 'tests', 'tools', 'slow_manager.py');
    const proxy = spawn('python3', [script, '--listen', path.join(runtime, 'systemd', 'private'),
      '--to', path.join(String(process.env.XDG_RUNTIME_DIR), 'systemd', 'private'),
      '--needle', 'AUTH', '--delay', String(HELD_MS / 1000), '--first-only'],
    { stdio: ['ignore', 'pipe', 'inherit'] });
    t.after(() => { proxy.kill('SIGKILL'); });
    await new Promise((resolve, reject) => {
      proxy.stdout.once('data', resolve);
      proxy.once('exit', (code) => reject(new Error(`slow_manager.py exited ${code}`)));
    });
    /** @type {NodeJS.ProcessEnv} */
    // The stand-in is a relay in front of the manager: systemd-run, which would lose the launch
    // behind one, is never used there, so the launcher program is.
    const env = { ...process.env, XDG_RUNTIME_DIR: runtime, SYNAPS_SCOPE_LAUNCHER: 'synaps-scope-exec' };
    delete env.DBUS_SESSION_BUS_ADDRESS;
    const began = Date.now();
    const holder = scope.launcherForEnv({ env, probeTimeoutMs: 3000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await meanwhile(env, runtime);
    const code = await new Promise((resolve) => {
      spawn(process.execPath, ['-e', OTHER], { env, stdio: 'inherit' }).once('exit', resolve);
    });
    const ended = Date.now() - began;
    await holder;
    assert.equal(code, 0);
    assert.ok(ended >= HELD_MS, `${name}: the other process's request ended ${ended} ms after the turn was taken`);
  });
}
