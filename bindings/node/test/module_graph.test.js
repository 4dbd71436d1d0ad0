'use strict';
// No circle of `require`s among the package's own files: each module of lib/ stands on the ones
// below it, as the Rust crates' modules do (tests/module_graph.rs). Read from every .js file of
// the package outside test/ and node_modules/, every relative require() (at the top or inside a
// function: a lazy require still makes the circle, only later).
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test } = require('node:test');

/**
 * The package's own .js files under `root`, by path relative to it.
 * @param {string} root
 * @param {string} [dir]
 * @param {string[]} [found]
 * @returns {string[]}
 */
function sources(root, dir = root, found = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!['node_modules', 'test', 'prebuilds'].includes(entry.name)) sources(root, full, found);
    } else if (entry.name.endsWith('.js')) {
      found.push(path.relative(root, full));
    }
  }
  return found;
}

/**
 * Each file's relative requires, as files relative to `root`, comments left out.
 * @param {string} root
 * @returns {Map<string, string[]>}
 */
function graph(root) {
  const edges = new Map();
  for (const file of sources(root)) {
    const code = fs
      .readFileSync(path.join(root, file), 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    const deps = [...code.matchAll(/require\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g)].map((m) =>
      path.normalize(path.join(path.dirname(file), m[1])),
    );
    edges.set(file, deps);
  }
  return edges;
}

/**
 * A circle of `edges` as the files along it, or null.
 * @param {Map<string, string[]>} edges
 * @returns {string[] | null}
 */
function findCircle(edges) {
  const done = new Set();
  /** @type {(node: string, trail: string[]) => string[] | null} */
  const visit = (node, trail) => {
    const at = trail.indexOf(node);
    if (at >= 0) return [...trail.slice(at), node];
    if (done.has(node)) return null;
    done.add(node);
    for (const next of edges.get(node) ?? []) {
      /** @type {string[] | null} */
      const circle = visit(next, [...trail, node]);
      if (circle) return circle;
    }
    return null;
  };
  for (const node of edges.keys()) {
    const circle = visit(node, []);
    if (circle) return circle;
  }
  return null;
}

test("the package's modules require one another without a circle", () => {
  const edges = graph(path.join(__dirname, '..'));
  assert.ok((edges.get('index.js') ?? []).length >= 8, 'index.js requires the modules of lib/');
  assert.ok([...edges.values()].flat().length >= 30, 'the requires were read');
  assert.equal(findCircle(edges), null, `a circle of requires: ${findCircle(edges)?.join(' -> ')}`);
});

test('the reading sees a circle where there is one, a lazy require too', (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'synaps-require-graph-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.mkdirSync(path.join(root, 'lib'));
  fs.writeFileSync(path.join(root, 'index.js'), "require('./lib/a.js');\n");
  fs.writeFileSync(path.join(root, 'lib', 'a.js'), "const { b } = require('./b.js');\n");
  fs.writeFileSync(path.join(root, 'lib', 'b.js'), "// require('./a.js') in a comment is none\nfunction later() { return require('./c.js'); }\n");
  fs.writeFileSync(path.join(root, 'lib', 'c.js'), "require('../lib/a.js');\n");
  assert.deepEqual(findCircle(graph(root)), ['lib/a.js', 'lib/b.js', 'lib/c.js', 'lib/a.js']);
  fs.writeFileSync(path.join(root, 'lib', 'c.js'), "require('node:fs');\n");
  assert.equal(findCircle(graph(root)), null, 'a comment and a package are no edge');
});
