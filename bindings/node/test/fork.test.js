// @ts-check
'use strict';
// Hosts that fork, from Node. Node has no fork() that keeps running JavaScript: child_process.fork()
// starts a new Node process (it execs), so a child holds nothing of its parent's requests, kept
// connections or turns, and starts afresh. Shown here as a host has it: children made while the
// parent's requests are in flight get their first answer within their own bound.
const assert = require('node:assert/strict');
const { fork } = require('node:child_process');
const { once } = require('node:events');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('..');
const { Manager, requireRig } = require('./helpers.js');

const BOUND_MS = 1000;

test('children of child_process.fork() amid requests answer within their own bound', async (t) => {
  if (!requireRig(t)) return;
  const manager = await new Manager().ready();
  try {
    const inFlight = Array.from({ length: 20 }, () => scope.launcherForEnv({ env: manager.env }));
    const answers = [];
    for (let i = 0; i < 4; i++) {
      const child = fork(path.join(__dirname, 'fork_child.js'), [String(BOUND_MS)], { env: manager.env });
      const [answer] = await once(child, 'message');
      await once(child, 'exit');
      answers.push(answer);
    }
    for (const launcher of await Promise.all(inFlight)) assert.ok(launcher, "the parent's requests are scoped");
    for (const { scoped, tookMs } of answers) {
      assert.ok(scoped, 'the child is scoped');
      assert.ok(tookMs < BOUND_MS + 100, `the child's first request took ${tookMs.toFixed(0)} ms`);
    }
  } finally {
    manager.close();
  }
});
