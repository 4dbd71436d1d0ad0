// @ts-check
'use strict';
// Test support: the rig's real user manager, managers of a test's own to stop, and the logger's
// lines.
const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const scope = require('..');

/** Fails the test loudly unless the rig started a manager (or skipping was asked for). */
function requireRig(/** @type {import('node:test').TestContext} */ t) {
  const ready = ['SYNAPS_RIG_SYSTEMD_VERSION', 'SYNAPS_RIG_MANAGER', 'SYNAPS_RIG_CGROUP', 'XDG_RUNTIME_DIR'].every(
    (name) => process.env[name],
  );
  if (ready) return true;
  if (process.env.SYNAPS_SKIP_MANAGER_TESTS === '1') {
    t.skip('SYNAPS_SKIP_MANAGER_TESTS=1: this test needs a real systemd user manager');
    return false;
  }
  throw new Error(
    'this test needs a real systemd user manager and none was started: run it through ' +
      '`scripts/systemd-rig.sh [--systemd 247|252|254|257|262] -- node --test bindings/node/test/` as root ' +
      '(scripts/test.sh does), or set SYNAPS_SKIP_MANAGER_TESTS=1 to skip such tests on purpose',
  );
}

/** process.env without the user-bus variables: no manager can be reached. */
function noBusEnv() {
  const env = { ...process.env };
  delete env.XDG_RUNTIME_DIR;
  delete env.DBUS_SESSION_BUS_ADDRESS;
  return env;
}

/** A systemd user manager of the test's own, in its own cgroup and XDG_RUNTIME_DIR. */
class Manager {
  constructor() {
    this.scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'synaps-node-manager-'));
    this.runtimeDir = path.join(this.scratch, 'runtime');
    fs.mkdirSync(this.runtimeDir, { mode: 0o700 });
    this.cgroup = path.join(String(process.env.SYNAPS_RIG_CGROUP), `node-manager-${process.pid}-${path.basename(this.scratch)}`);
    const service = path.join(this.cgroup, 'user@0.service');
    fs.mkdirSync(service, { recursive: true });
    this.env = { ...process.env, XDG_RUNTIME_DIR: this.runtimeDir };
    this.process = spawn(
      'sh',
      ['-c', 'echo $$ > "$1/cgroup.procs" && exec "$2" --user', 'sh', service, String(process.env.SYNAPS_RIG_MANAGER)],
      { env: this.env, stdio: 'ignore' },
    );
  }

  /** Resolves once the manager answers. */
  async ready() {
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (this.process.exitCode !== null) throw new Error(`the test's manager exited with ${this.process.exitCode}`);
      let state = '';
      try {
        state = execFileSync('systemctl', ['--user', 'is-system-running'], { env: this.env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      } catch (error) {
        state = String(/** @type {{stdout?: string}} */ (error).stdout ?? '').trim();
      }
      if (state === 'running' || state === 'degraded') return this;
      if (Date.now() > deadline) throw new Error('the test\'s user manager did not come up within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** @param {NodeJS.Signals} signal */
  signal(signal) {
    execFileSync('kill', [`-${signal.replace(/^SIG/, '')}`, String(this.process.pid)]);
  }

  close() {
    if (this.process.exitCode === null) {
      this.signal('SIGCONT');
      this.process.kill('SIGKILL');
    }
    try {
      fs.writeFileSync(path.join(this.cgroup, 'cgroup.kill'), '1');
    } catch {
      // Already gone.
    }
    const deadline = Date.now() + 5000;
    while (fs.existsSync(this.cgroup) && Date.now() < deadline) {
      try {
        execFileSync('find', [this.cgroup, '-depth', '-type', 'd', '-exec', 'rmdir', '{}', '+'], { stdio: 'ignore' });
      } catch {
        // Not empty yet.
      }
    }
    fs.rmSync(this.scratch, { recursive: true, force: true });
  }
}

/**
 * Collects a child's stdout as a Buffer and waits for its exit code.
 * @param {import('node:child_process').ChildProcess} child
 * @returns {Promise<{code: number | null, stdout: Buffer}>}
 */
function collect(child) {
  /** @type {Buffer[]} */
  const chunks = [];
  child.stdout?.on('data', (chunk) => chunks.push(chunk));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(chunks) }));
  });
}

const CGROUP_OF_SELF = "grep '^0::' /proc/$$/cgroup | cut -c4-";
const PRINT_ARGS = 'for a; do printf \'%s\\0\' "$a"; done';

/** Runs `body` with the logger collecting [level, message] lines, then puts the default back. */
async function withLines(/** @type {(lines: Array<[string, string]>) => Promise<void>} */ body) {
  /** @type {Array<[string, string]>} */
  const lines = [];
  scope.setLogger((level, message) => lines.push([level, message]));
  try {
    await body(lines);
  } finally {
    scope.setLogger((level, message) => console.warn(`synaps-scope: ${level}: ${message}`));
  }
}

/** The handle of `child`'s scope, once the child has entered it. */
async function handleOnceInScope(/** @type {import('node:child_process').ChildProcess & { scopeUnit: string | null }} */ child) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return scope.ScopeHandle.fromPid(String(child.scopeUnit), Number(child.pid));
    } catch (error) {
      assert.ok(Date.now() < deadline, `the child never reached its scope: ${error}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

/**
 * A new directory for one test, removed with everything in it when the test ends, however it ends.
 * @param {import('node:test').TestContext} t
 * @param {string} label
 */
function scratchDir(t, label) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `synaps-node-${label}-`));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Copies the package's own files, as npm would install them (package.json's "files" but its
 * prebuilds, and the repository's docs/ and examples/, which scripts/dist.sh puts beside them), into
 * `dir`, with its node_modules linked: a copy of the package outside the repository.
 * @param {string} dir
 */
function copyPackage(dir) {
  const root = path.join(__dirname, '..');
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const fromDist = ['prebuilds/', 'docs/', 'examples/'];
  for (const file of [...pkg.files, 'package.json'].filter((f) => !fromDist.includes(f))) {
    fs.cpSync(path.join(root, file), path.join(dir, file), { recursive: true });
  }
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
}

module.exports = { CGROUP_OF_SELF, Manager, PRINT_ARGS, collect, copyPackage, handleOnceInScope, noBusEnv, requireRig, scratchDir, withLines };
