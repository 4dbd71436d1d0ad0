'use strict';
// child_process.spawn in a scope, by the library's spawn policy: a child that switches user runs
// directly, a shell command runs inside the scope.
const childProcess = require('node:child_process');

const { check } = require('./error.js');
const { c } = require('./library.js');
const { launcherForEnv, pointerOf } = require('./launcher.js');
const { deliverLogLines } = require('./log.js');

/**
 * `launcher`, or null for a child that switches user (`uid`, `gid`), by the library's rule
 * (`scope_launcher_user_switch`): such a child runs directly, with one warning per process saying
 * why; in `required` mode it is refused with ScopeRequiredError before anything is spawned.
 */
function unlessUserSwitch(launcher, { uid, gid }) {
  const switches = [['uid', uid], ['gid', gid]].filter(([, value]) => value !== undefined).map(([name, value]) => `${name}=${value}`);
  if (!launcher || switches.length === 0) return launcher;
  try {
    check(c.launcherUserSwitch(pointerOf(launcher), switches.join(', ')));
  } finally {
    deliverLogLines();
    launcher.close();
  }
  return null;
}

/**
 * child_process.spawn in a scope: resolves to the ChildProcess, with `scopeUnit` naming its scope
 * (null for a direct launch). `shell: true` runs `/bin/sh -c` inside the scope; `limits` are the
 * scope's resource limits (ScopeLauncher.withLimits).
 */
async function spawn(command, args = [], options = {}) {
  if (!Array.isArray(args)) {
    options = args ?? {};
    args = [];
  }
  const { kind, probeTimeoutMs, limits, ...spawnOptions } = options;
  const launcher = unlessUserSwitch(await launcherForEnv({ env: spawnOptions.env, kind, probeTimeoutMs, limits }), spawnOptions);
  let argv = [command, ...args];
  let unit = null;
  if (launcher) {
    const { argv0 } = spawnOptions;
    try {
      if (spawnOptions.shell) {
        ({ argv, unit } = launcher.wrapShell(argv, { env: spawnOptions.env, cwd: spawnOptions.cwd, shell: spawnOptions.shell }));
        spawnOptions.shell = false;
      } else {
        ({ argv, unit } = launcher.wrap(argv, { env: spawnOptions.env, cwd: spawnOptions.cwd, argv0 }));
      }
    } finally {
      launcher.close();
    }
    // The spawned program is the wrapper; the command's argv[0] travels in the wrapped argv.
    delete spawnOptions.argv0;
  }
  const child = childProcess.spawn(argv[0], argv.slice(1), spawnOptions);
  child.scopeUnit = unit;
  return child;
}

module.exports = { spawn };
