// @ts-check
'use strict';
// The long run (issue 13): a million wraps and ten thousand probes in one process, RSS sampled
// every 100,000 wraps; over the second half it must stay flat within 8 MB (a leak of 16 bytes a
// wrap would exceed that). Run by scripts/long-run.sh: node --expose-gc bindings/node/test/long_run.js
const scope = require('..');

const WRAPS = 1_000_000;
const PROBES = 10_000;
const MARGIN_MB = 8;

async function main() {
  if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
  const gc = globalThis.gc;
  const rss = () => process.memoryUsage().rss / 1048576;
  const launcher = scope.launcherForEnvSync();
  if (!launcher) throw new Error('the long run needs a manager that scopes launches');
  const started = Date.now();
  /** @type {number[]} */
  const samples = [];
  for (let i = 1; i <= WRAPS; i++) {
    const wrapped = launcher.wrap(['sh', '-c', 'exit 0', String(i)]);
    if (!wrapped.unit) throw new Error(`wrap ${i} left the argv unwrapped`);
    if (i % 100_000 === 0) {
      gc();
      samples.push(rss());
    }
  }
  launcher.close();
  const before = rss();
  for (let i = 1; i <= PROBES; i++) {
    const probed = await scope.launcherForEnv();
    if (!probed) throw new Error(`probe ${i} went direct`);
    probed.close();
  }
  gc();
  const after = rss();
  const half = samples.slice(samples.length / 2 - 1);
  const growth = Math.max(...half) - half[0];
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  console.log(`node long run: ${WRAPS} wraps, RSS every 100,000 (MB): ${samples.map((s) => s.toFixed(1)).join(' ')}`);
  console.log(`node long run: second half grew ${growth.toFixed(1)} MB (margin ${MARGIN_MB}); ${PROBES} probes: ${before.toFixed(1)} -> ${after.toFixed(1)} MB; ${seconds} s`);
  if (growth >= MARGIN_MB) throw new Error(`RSS grew ${growth.toFixed(1)} MB over the second half of the wraps`);
  if (after - before >= MARGIN_MB) throw new Error(`RSS grew ${(after - before).toFixed(1)} MB over ${PROBES} probes`);
}

main().catch((error) => {
  console.error(`node long run FAILED: ${error.message}`);
  process.exit(1);
});
