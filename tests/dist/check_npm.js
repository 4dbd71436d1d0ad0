'use strict';
// Run from an empty npm project that installed the package tarball, outside the repository
// (scripts/test-dist.sh). Usage: node check_npm.js VERSION own|system|none [C-LIBDIR]
//   own     the package loads its own prebuilt library and uses the launcher beside it
//   system  (its prebuilds removed, LD_LIBRARY_PATH=C-LIBDIR) it loads the C tarball's library
//           through the dynamic loader and uses the launcher in that library's ../libexec
//   none    neither: require throws, naming every place it tried
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const [version, mode, libdir] = process.argv.slice(2);
const packageDir = path.dirname(require.resolve('synaps-scope/package.json'));
const own = path.join(packageDir, 'prebuilds', 'linux-x64');

async function main() {
  if (mode === 'none') {
    assert.throws(() => require('synaps-scope'), (error) => {
      assert.match(error.message, /cannot find libsynaps_scope\.so; tried, in order:/);
      assert.ok(error.message.includes(`${path.join(own, 'libsynaps_scope.so')} (not found)`), error.message);
      assert.match(error.message, /libsynaps_scope\.so\.1 through the dynamic loader's search \(.+\)/);
      return true;
    });
    console.log('npm: with no library anywhere, require says every place it tried');
    return;
  }
  const scope = require('synaps-scope');
  assert.equal(scope.version, version);
  assert.equal(require('synaps-scope/package.json').version, version);
  const library = mode === 'own' ? path.join(own, 'libsynaps_scope.so') : path.join(libdir, `libsynaps_scope.so.${version}`);
  const launcherProgram = mode === 'own'
    ? path.join(own, 'synaps-scope-exec')
    : path.join(libdir, '..', 'libexec', 'synaps-scope', 'synaps-scope-exec');
  assert.equal(fs.realpathSync(scope.libraryPath), fs.realpathSync(library));

  const report = await scope.doctor();
  const found = /^ {2}synaps-scope-exec: (.+) \((beside|in the libexec directory of) (.+)\)$/m.exec(report);
  assert.ok(found, `doctor names no launcher program:\n${report}`);
  assert.equal(fs.realpathSync(found[1]), fs.realpathSync(launcherProgram), report);
  assert.equal(fs.realpathSync(found[3]), fs.realpathSync(library), report);
  assert.match(report, /^verdict: {7}scopes will be used \(exit 0\)$/m, report);

  const launcher = await scope.launcherForEnv();
  assert.ok(launcher, 'no launcher: scopes unavailable');
  assert.equal(launcher.wrapper, 'synaps-scope-exec');
  assert.equal(fs.realpathSync(launcher.wrap(['true']).argv[0]), fs.realpathSync(launcherProgram));

  const child = await scope.spawn('sh', ['-c', 'grep ^0:: /proc/$$/cgroup'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk) => { out += chunk; });
  const code = await new Promise((resolve) => child.on('close', resolve));
  assert.equal(code, 0);
  assert.match(child.scopeUnit ?? '', /^synaps-tool-[0-9a-f]{32}\.scope$/);
  assert.equal(path.basename(out.trim()), child.scopeUnit, out);
  // Made by this user's own manager, in the subtree delegated to it.
  assert.ok(out.includes(`/user@${process.getuid()}.service/`), out);
  console.log(`npm (${mode} library): synaps-scope ${version} ran its child in ${child.scopeUnit} through ${found[1]}`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
