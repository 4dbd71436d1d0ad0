'use strict';
// A daemon's watch from Node on its tools' scopes, as alice in the virtual machine, against the real
// systemd-oomd, from the npm project in which scripts/test-vm.sh installed the package tarball; started
// by daemon.py beside its tools:
//   node watch.js FILE UNIT...
// FILE gets "started SECONDS" as the program starts, then each 'warning' event as "SECONDS UNIT
// RULE SURE FIGURE LIMIT" (SECONDS on the monotonic clock, Python's time.monotonic()). On SIGTERM the watch is closed, and an event after
// close() resolved would write "after-close" (none may come).
const fs = require('node:fs');

const scope = require('synaps-scope');

const [file, ...units] = process.argv.slice(2);
const monotonic = () => (Number(process.hrtime.bigint()) / 1e9).toFixed(3);

fs.appendFileSync(file, `started ${monotonic()}\n`);
(async () => {
  const handles = await Promise.all(units.map((unit) => scope.ScopeHandle.fromManager(unit)));
  const watch = await scope.OomdWatch.create(handles);
  let closed = false;
  watch.on('warning', (w) => {
    if (closed) fs.appendFileSync(file, 'after-close\n');
    fs.appendFileSync(file, `${monotonic()} ${w.unit} ${w.rule} ${w.sure} ${w.figure.toFixed(2)} ${w.limit.toFixed(2)}\n`);
  });
  fs.appendFileSync(file, `watching ${watch.watched.length}\n`);
  // The watch holds no event loop open: this timer does, until SIGTERM.
  const alive = setInterval(() => {}, 60_000);
  process.on('SIGTERM', async () => {
    await watch.close();
    closed = true;
    setTimeout(() => {
      clearInterval(alive);
      for (const handle of handles) handle.close();
    }, 1000);
  });
})().catch((error) => {
  fs.appendFileSync(file, `failed ${error}\n`);
  process.exit(1);
});
