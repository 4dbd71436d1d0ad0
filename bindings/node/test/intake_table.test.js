'use strict';
// tests/cases/bad_input.json from Node: every bad value Node can hand over is refused by each call
// that takes it with the class every surface gives it (bad input: the library's INVALID_ARGUMENT or
// INVALID_KIND, as C's code for the case says). The Rust, command line, C and Python surfaces run
// the same cases.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const scope = require('../index.js');

const { cases } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'tests', 'cases', 'bad_input.json'), 'utf8'));

/**
 * Each call of the package that takes the case's value, or none when Node cannot hand it over (a C
 * envp entry, a number given for a kind or shell words, a bound in seconds).
 * @param {any} c
 * @returns {[string, () => unknown][]}
 */
function calls(c) {
  const unit = 'synaps-tool-0123456789abcdef0123456789abcdef.scope';
  if (c.env) {
    const env = Object.fromEntries(c.env);
    return [
      ['launcherForEnv', () => scope.launcherForEnv({ env })],
      ['launcherForEnvSync', () => scope.launcherForEnvSync({ env })],
      ['resolveProgram', () => scope.resolveProgram('sh', { env })],
      ['diagnose', () => scope.diagnose({ env })],
    ];
  }
  if (c.bound_ms !== undefined) {
    const ms = c.bound_ms;
    return [
      ['launcherForEnv', () => scope.launcherForEnv({ probeTimeoutMs: ms })],
      ['flushWarnings', () => scope.flushWarnings(ms)],
      ['diagnose', () => scope.diagnose({ timeoutMs: ms })],
      ['ScopeHandle.fromManager', () => scope.ScopeHandle.fromManager(unit, { timeoutMs: ms })],
    ];
  }
  if (c.pid !== undefined) {
    return [
      ['ScopeHandle.ofProcess', () => scope.ScopeHandle.ofProcess(c.pid)],
      ['ScopeHandle.fromPid', () => scope.ScopeHandle.fromPid(unit, c.pid)],
    ];
  }
  if (c.kind !== undefined) return [['launcherForEnv', () => scope.launcherForEnv({ kind: c.kind })]];
  if (c.limit !== undefined) {
    const limits = { [c.limit[0]]: c.limit[1] };
    return [
      ['checkLimits', () => scope.checkLimits(limits)],
      ['launcherForEnv', () => scope.launcherForEnv({ limits })],
      ['launcherForEnvSync', () => scope.launcherForEnvSync({ limits })],
      ['spawn', () => scope.spawn('true', [], { limits })],
    ];
  }
  assert.ok(['entry', 'bound_s', 'kind_code', 'shell_words_code'].some((key) => key in c), JSON.stringify(c));
  return [];
}

for (const c of cases) {
  test(`bad input: ${c.name}`, async () => {
    for (const [name, call] of calls(c)) {
      await assert.rejects(
        async () => call(),
        (/** @type {any} */ error) => {
          assert.equal(error.name, 'ScopeError', `${name}: ${error}`);
          assert.equal(error.code, `SCOPE_${c.c_result}`, `${name}: ${error.message}`);
          return true;
        },
      );
    }
  });
}

test('Node runs most of the table', () => {
  assert.ok(cases.map(calls).flat().length >= 68);
});
