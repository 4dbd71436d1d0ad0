// @ts-check
'use strict';
// The package itself: its tables, ABI check and version agree with the library and the header, and
// doctor reports what it loaded.
const assert = require('node:assert/strict');
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { copyPackage, requireRig, scratchDir } = require('./helpers.js');

test('the result codes, log levels and kinds are the header\'s', () => {
  const header = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'include', 'synaps_scope.h'), 'utf8');
  /** @param {RegExp} pattern */
  const table = (pattern) => [...header.matchAll(pattern)].map((m) => [m[1], Number(m[2])]);
  const results = table(/^\s*SCOPE_RESULT_(\w+) = (\d+),$/gm);
  assert.ok(results.length >= 14);
  assert.deepEqual(results, scope.RESULT_NAMES.map((name, number) => [name, number]));
  const endings = table(/^\s*SCOPE_ENDING_KIND_(\w+) = (\d+),$/gm);
  assert.deepEqual(endings, scope.ENDING_NAMES.map((name, number) => [name, number]));
  const rules = table(/^\s*SCOPE_OOMD_RULE_(\w+) = (\d+),$/gm);
  assert.deepEqual(rules, scope.OOMD_RULE_NAMES.map((name, number) => [name, number]));
  const evidence = table(/^\s*SCOPE_EVIDENCE_(\w+) = (\d+),$/gm);
  assert.deepEqual(evidence, scope.EVIDENCE_NAMES.map((name, number) => [name, number]));
  const verdicts = table(/^#define SCOPE_VERDICT_(\w+) (\d+)$/gm);
  assert.deepEqual(verdicts, scope.VERDICT_NAMES.map((name, number) => [name, number]));
  const levels = table(/^\s*SCOPE_LOG_LEVEL_(\w+) = (\d+),$/gm);
  assert.deepEqual(levels, scope.LOG_LEVELS.slice(1).map((name, i) => [name.toUpperCase(), i + 1]));
  const shellWords = table(/^#define SCOPE_SHELL_WORDS_(\w+) (\d+)$/gm);
  assert.deepEqual(shellWords, Object.entries(scope.SHELL_WORDS).map(([name, number]) => [name.toUpperCase(), number]));
  const kinds = table(/^#define SCOPE_KIND_(\w+) (\d+)$/gm);
  assert.deepEqual(kinds, Object.entries(scope.KINDS).map(([name, number]) => [name.toUpperCase(), number]));
  const wrappers = table(/^#define SCOPE_WRAPPER_(\w+) (\d+)$/gm);
  assert.deepEqual(wrappers, [['EXEC', scope.WRAPPERS['synaps-scope-exec']], ['SYSTEMD_RUN', scope.WRAPPERS['systemd-run']]]);
  assert.deepEqual(table(/^#define SCOPE_(EXEC_FAILED_STATUS) (\d+)$/gm), [['EXEC_FAILED_STATUS', scope.EXEC_FAILED_STATUS]]);
  assert.deepEqual(table(/^#define SCOPE_(DEFAULT_\w+_MS) (\d+)$/gm), [
    ['DEFAULT_PROBE_TIMEOUT_MS', scope.DEFAULT_PROBE_TIMEOUT_MS],
    ['DEFAULT_KILL_TIMEOUT_MS', scope.DEFAULT_KILL_TIMEOUT_MS],
  ]);
  assert.deepEqual(Object.entries(scope.RESULT), results, 'each result by its name');
});

test('a library of another ABI version, or none, is refused with a clear message', (t) => {
  if (!requireRig(t)) return;
  const dir = scratchDir(t, 'abi');
  const source = path.join(dir, 'fake.c');
  fs.writeFileSync(source, 'unsigned scope_abi_version(void) { return 999; }\n');
  const fake = path.join(dir, 'libsynaps_scope.so');
  execFileSync('cc', ['-shared', '-fPIC', '-o', fake, source]);
  const load = (/** @type {Record<string, string>} */ env, /** @type {string} */ from) =>
    spawnSync(process.execPath, ['-e', `require(${JSON.stringify(from)})`], { env: { ...process.env, ...env }, encoding: 'utf8' });

  const wrong = load({ SYNAPS_SCOPE_LIB: fake }, path.resolve(__dirname, '..'));
  assert.notEqual(wrong.status, 0);
  assert.match(wrong.stderr, /implements C ABI version 999, but this package was written for version 1/);

  const copy = path.join(dir, 'package');
  fs.mkdirSync(copy);
  copyPackage(copy);
  const env = { ...process.env };
  delete env.SYNAPS_SCOPE_LIB;
  const missing = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(copy)})`], { env, encoding: 'utf8' });
  assert.notEqual(missing.status, 0);
  assert.match(missing.stderr, /cannot find libsynaps_scope\.so; tried, in order:/);
  assert.ok(missing.stderr.includes(`${path.join(copy, 'prebuilds', 'linux-x64', 'libsynaps_scope.so')} (not found)`), missing.stderr);
  assert.match(missing.stderr, /libsynaps_scope\.so\.1 through the dynamic loader's search \(.+\)/);

  // A library installed on the system is found by its soname, through the dynamic loader.
  const system = path.join(dir, 'system-lib');
  fs.mkdirSync(system);
  fs.copyFileSync(scope.libraryPath, path.join(system, 'libsynaps_scope.so.1'));
  const found = spawnSync(process.execPath, ['-e', `console.log(require(${JSON.stringify(copy)}).libraryPath)`], {
    env: { ...env, LD_LIBRARY_PATH: system },
    encoding: 'utf8',
  });
  assert.equal(found.status, 0, found.stderr);
  assert.equal(found.stdout.trim(), path.join(system, 'libsynaps_scope.so.1'));
});

test('doctor names the library and the launcher program beside it, found with no configuration', async (t) => {
  if (!requireRig(t)) return;
  const report = await scope.doctor();
  assert.ok(report.startsWith(`library:       ${scope.libraryPath}\n`), report);
  assert.match(report, /^verdict: {7}scopes will be used \(exit 0\)$/m, report);
  // The way to the manager (the rig's session bus once the manager is on it, else the private
  // socket) and the order tried.
  const runtime = process.env.XDG_RUNTIME_DIR;
  const privateSocket = `reached by:    private socket ${runtime}/systemd/private`;
  const ways = [privateSocket, `reached by:    session bus unix:path=${runtime}/bus`];
  // Right after the rig starts, its manager may not own its name on the bus yet.
  const notYet = `${privateSocket} (the session bus passed over: Could not get owner of name 'org.freedesktop.systemd1'`;
  assert.ok(report.split('\n').some((line) => ways.includes(line)) || report.includes(notYet), report);
  const order = process.env.SYNAPS_SCOPE_LAUNCHER === 'systemd-run' ? "systemd-run's" : "the launcher program's";
  assert.ok(report.includes(`\n  in the order ${order}`), report);
  await assert.rejects(scope.doctor({ env: { '': 'x' } }), { name: 'ScopeError', code: 'SCOPE_INVALID_ARGUMENT' });
  await assert.rejects(scope.doctor({ timeoutMs: 0 }), { name: 'ScopeError', code: 'SCOPE_INVALID_ARGUMENT' });
  // The verdict as a value, which the report's last line says in words.
  const diagnosis = await scope.diagnose();
  assert.deepEqual([diagnosis.verdict, diagnosis.exitCode, diagnosis.words], ['scoped', 0, 'scopes will be used']);
  assert.match(diagnosis.report, /^verdict: {7}scopes will be used \(exit 0\)$/m);
  const required = { ...process.env, SYNAPS_PROCESS_SCOPES: 'required', XDG_RUNTIME_DIR: undefined, DBUS_SESSION_BUS_ADDRESS: undefined };
  const refused = await scope.diagnose({ env: required });
  assert.deepEqual([refused.verdict, refused.exitCode], ['refused', 3]);
  assert.match(refused.report, /^verdict: {7}required mode will refuse launches \(exit 3\)$/m);

  // The package as npm installs it: its own library, the launcher program beside it.
  const dir = scratchDir(t, 'bundle');
  const prebuilds = path.join(dir, 'prebuilds', 'linux-x64');
  fs.mkdirSync(prebuilds, { recursive: true });
  copyPackage(dir);
  fs.copyFileSync(scope.libraryPath, path.join(prebuilds, 'libsynaps_scope.so'));
  const exec = process.env.SYNAPS_SCOPE_EXEC;
  assert.ok(exec, 'SYNAPS_SCOPE_EXEC names the launcher program built for this test run');
  fs.copyFileSync(exec, path.join(prebuilds, 'synaps-scope-exec'));
  fs.chmodSync(path.join(prebuilds, 'synaps-scope-exec'), 0o755);
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('SYNAPS_SCOPE_')));
  const cli = spawnSync(process.execPath, [path.join(dir, 'cli.js'), 'doctor'], { env, encoding: 'utf8' });
  const library = path.join(prebuilds, 'libsynaps_scope.so');
  assert.ok(cli.stdout.startsWith(`library:       ${library}\n`), cli.stdout + cli.stderr);
  assert.ok(cli.stdout.includes(`\n  synaps-scope-exec: ${path.join(prebuilds, 'synaps-scope-exec')} (beside ${library})\n`), cli.stdout);
  assert.equal(cli.status, 0, cli.stdout + cli.stderr);
  const usage = spawnSync(process.execPath, [path.join(dir, 'cli.js'), 'bogus'], { env, encoding: 'utf8' });
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /usage: synaps-scope doctor/);
  assert.match(usage.stderr, /2 usage error or bad input, 3 required mode would refuse/);
  // Required mode with no manager: 3, apart from the usage error's 2.
  const refusing = { ...env, SYNAPS_PROCESS_SCOPES: 'required', XDG_RUNTIME_DIR: '', DBUS_SESSION_BUS_ADDRESS: '' };
  const cliRefused = spawnSync(process.execPath, [path.join(dir, 'cli.js'), 'doctor'], { env: refusing, encoding: 'utf8' });
  assert.equal(cliRefused.status, 3, cliRefused.stdout + cliRefused.stderr);
});

test('the package, the library and the header agree on one version', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'));
  assert.equal(scope.version, pkg.version);
  assert.equal(Number(pkg.version.split('.')[0]), scope.ABI_VERSION, 'the major version is the C ABI version');
});
