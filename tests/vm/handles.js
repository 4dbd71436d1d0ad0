'use strict';
// Scope handles from Node against real controllers, as alice in the virtual machine, from the npm
// project in which scripts/test-vm.sh installed the package tarball (koffi from the npm registry;
// the machine has no network): stats() reads what the cgroup's own files hold; ending() tells a
// handle's kill and a tool that ended on its own apart, asked after the exit status is in and the
// scope is collected.
const assert = require('node:assert/strict');
const { once } = require('node:events');
const fs = require('node:fs');
const path = require('node:path');

const scope = require('synaps-scope');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function launch(command, args) {
  const child = await scope.spawn(command, args, { stdio: 'ignore' });
  const exited = once(child, 'exit');
  for (const deadline = Date.now() + 10_000; ; await sleep(10)) {
    try {
      return { child, exited, handle: scope.ScopeHandle.fromPid(String(child.scopeUnit), Number(child.pid)) };
    } catch (error) {
      assert.ok(Date.now() < deadline, `never in its scope: ${error}`);
    }
  }
}

async function collected(handle) {
  for (const deadline = Date.now() + 10_000; fs.existsSync(handle.cgroup); await sleep(10)) {
    assert.ok(Date.now() < deadline, `the manager never collected ${handle.cgroup}`);
  }
}

async function main() {
  const { exited, handle } = await launch('sh', ['-c', 'head -c 50000000 /dev/zero | tail; sleep 300']);
  let stats = handle.stats();
  for (const deadline = Date.now() + 30_000; !(stats.memoryCurrent > 40e6); await sleep(10)) {
    assert.ok(Date.now() < deadline, `memory ${JSON.stringify(stats)}`);
    stats = handle.stats();
  }
  const file = (name) => Number(fs.readFileSync(path.join(handle.cgroup, name), 'utf8'));
  const memory = file('memory.current');
  const tasks = file('pids.current');
  assert.ok(Math.abs(stats.memoryCurrent - memory) < 4 << 20, `stats ${stats.memoryCurrent}, file ${memory}`);
  assert.equal(stats.pidsCurrent, tasks);
  assert.equal(tasks, 3);
  console.log(`ok: Node: stats of ${handle.unit}: memoryCurrent ${stats.memoryCurrent >> 20} MB (file ${memory >> 20} MB), pidsCurrent ${stats.pidsCurrent} (file ${tasks})`);
  await handle.kill({ timeoutMs: 10_000 });
  assert.deepEqual(await exited, [null, 'SIGKILL']);
  await collected(handle);
  assert.deepEqual(await handle.ending(), { kind: 'handle-kill', oomdRule: null, kernelOomKills: 0, evidence: 'own-kill', forgeable: false });
  console.log("ok: Node: after the kill, the exit status and the collection, ending() says 'handle-kill'");
  handle.close();

  const quiet = await launch('sh', ['-c', 'sleep 1; exit 7']);
  assert.deepEqual(await quiet.exited, [7, null]);
  await collected(quiet.handle);
  assert.deepEqual(await quiet.handle.ending(), { kind: 'on-its-own', oomdRule: null, kernelOomKills: 0, evidence: 'memory-events', forgeable: false });
  console.log("ok: Node: a tool that exited 7: ending() says 'on-its-own'");
  quiet.handle.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
