// The folder boundaries of docs/design.md, checked on the import graph of src/ (every static and
// dynamic import, resolved to files). A rule broken here is an architecture change: fix the edge, or
// change the rule and the design doc together.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

interface Edge {
  from: string;
  /** repo-relative file for a project import; the bare specifier (node:fs, ink) otherwise */
  to: string;
  typeOnly: boolean;
}

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.tsx?$/.test(name) && !name.endsWith('.d.ts')) out.push(relative(ROOT, p));
  }
  return out;
}

function resolveSpec(from: string, spec: string): string {
  if (!spec.startsWith('.')) return spec;
  const base = relative(ROOT, resolve(ROOT, dirname(from), spec));
  for (const cand of [base.replace(/\.js$/, '.ts'), base.replace(/\.js$/, '.tsx'), base, `${base}/index.ts`]) {
    try {
      if (statSync(join(ROOT, cand)).isFile()) return cand;
    } catch {
      /* next */
    }
  }
  return base;
}

/** The imports of one file: `import type`/`export type` are type-only; so is an import whose every name is `type X`. */
export function importsOf(file: string, text: string): Edge[] {
  const out: Edge[] = [];
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  for (const m of code.matchAll(/^\s*(import|export)\s+(type\s+)?([^'";]*?)\s*from\s+'([^']+)'/gm)) {
    const names = m[3]!.trim();
    const allTypes =
      /^\{[^}]*\}$/.test(names) &&
      names
        .slice(1, -1)
        .split(',')
        .filter((s) => s.trim())
        .every((s) => /^\s*type\s/.test(s));
    out.push({ from: file, to: resolveSpec(file, m[4]!), typeOnly: Boolean(m[2]) || allTypes });
  }
  for (const m of code.matchAll(/^\s*import\s+'([^']+)'/gm))
    out.push({ from: file, to: resolveSpec(file, m[1]!), typeOnly: false });
  for (const m of code.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g))
    out.push({ from: file, to: resolveSpec(file, m[1]!), typeOnly: false });
  for (const m of code.matchAll(/\brequire\(\s*'([^']+)'\s*\)/g))
    out.push({ from: file, to: resolveSpec(file, m[1]!), typeOnly: false });
  return out;
}

const files = walk(join(ROOT, 'src'));
const edges = files.flatMap((f) => importsOf(f, readFileSync(join(ROOT, f), 'utf8')));
const valueEdges = edges.filter((e) => !e.typeOnly);

/** Modules through which a process touches the world: files, processes, sockets, terminals. */
const IO =
  /^(node:)?(fs|fs\/promises|child_process|net|tls|dgram|http|https|http2|worker_threads|readline|tty)$|^(ssh2|node-pty)$/;

/** Every file a module reaches through value imports, with the path that reached it. */
function valueClosure(start: string): Map<string, string[]> {
  const seen = new Map<string, string[]>([[start, [start]]]);
  const queue = [start];
  while (queue.length) {
    const f = queue.shift()!;
    for (const e of valueEdges) {
      if (e.from !== f || seen.has(e.to)) continue;
      seen.set(e.to, [...seen.get(f)!, e.to]);
      if (e.to.startsWith('src/')) queue.push(e.to);
    }
  }
  return seen;
}

/** The I/O a module does itself or through anything it value-imports: "a ← b ← node:fs" per finding. */
function ioReached(start: string): string[] {
  const found: string[] = [];
  for (const [to, path] of valueClosure(start))
    if (IO.test(to) || to.startsWith('src/remote/')) found.push(path.join(' → '));
  return found;
}

const under = (dir: string) => (f: string) => f.startsWith(dir);

test('the boundary checker sees imports the way TypeScript does (type-only, dynamic, multi-line)', () => {
  const es = importsOf(
    'src/ui/x.ts',
    [
      "import type { A } from '../checks/types.js';",
      "import { type B, type C } from '../checks/index.js';",
      "import {\n  D,\n  type E,\n} from '../remote/procs.js';",
      "const m = await import('node:fs');",
      "// import { F } from '../remote/gpu.js';",
    ].join('\n'),
  );
  assert.deepEqual(
    es.map((e) => [e.to, e.typeOnly]),
    [
      ['src/checks/types.ts', true],
      ['src/checks/index.ts', true],
      ['src/remote/procs.ts', false],
      ['node:fs', false],
    ],
  );
  assert.ok(valueEdges.length > 300, `the graph has the project's value imports (${valueEdges.length})`);
});

test('src/ui reads no file and runs no command: nothing it value-imports reaches fs, processes, sockets or src/remote', () => {
  const bad = files.filter(under('src/ui/')).flatMap(ioReached);
  assert.deepEqual(bad, []);
});

test('src/ui presents and never judges: its only value imports from src/checks are the presentation helpers', () => {
  const bad = valueEdges.filter(
    (e) => e.from.startsWith('src/ui/') && e.to.startsWith('src/checks/') && e.to !== 'src/checks/present.ts',
  );
  assert.deepEqual(
    bad.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

test('src/ui takes from the cockpit only types (the collector and the actions are handed in)', () => {
  const bad = valueEdges.filter(
    (e) => e.from.startsWith('src/ui/') && (e.to.startsWith('src/cockpit/') || e.to.startsWith('src/commands/')),
  );
  assert.deepEqual(
    bad.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

test('src/checks does no I/O, directly or through what it value-imports', () => {
  const bad = files.filter(under('src/checks/')).flatMap(ioReached);
  assert.deepEqual(bad, []);
});

test('src/bundle is pure (the command reads through the Host and writes the file): no fs, processes, sockets or src/remote; only types from the layers below', () => {
  const bad = files.filter(under('src/bundle/')).flatMap(ioReached);
  const up = edges.filter(
    (e) => e.from.startsWith('src/bundle/') && !e.typeOnly && /^src\/(ui|cockpit|commands|trainer)\//.test(e.to),
  );
  assert.deepEqual([...bad, ...up.map((e) => `${e.from} → ${e.to}`)], []);
});

test('src/journal: its lines (codec.ts) and the --at moment (at.ts) are pure; it writes only through src/trainer/control/ownfiles.ts (no fs or processes of its own) and never imports src/ui or src/commands', () => {
  const pure = ['src/journal/codec.ts', 'src/journal/at.ts'].flatMap(ioReached);
  const own = valueEdges.filter((e) => e.from.startsWith('src/journal/') && IO.test(e.to));
  const up = edges.filter((e) => e.from.startsWith('src/journal/') && /^src\/(ui|commands)\//.test(e.to));
  const writes = files
    .filter(under('src/journal/'))
    // a Host's own write calls (host.writeFile, .writeOwn, .remove…): only ownfiles.ts makes them
    .filter((f) =>
      /\.(writeFile|appendFile|writeOwn|removeOwn|mkdirp|remove)\(/.test(readFileSync(join(ROOT, f), 'utf8')),
    );
  assert.deepEqual(
    [...pure, ...own.map((e) => `${e.from} → ${e.to}`), ...up.map((e) => `${e.from} → ${e.to}`), ...writes],
    [],
  );
});

test('data never imports the UI or the cockpit: src/trainer, src/remote and src/checks stand without them', () => {
  const bad = edges.filter((e) => /^src\/(trainer|remote|checks)\//.test(e.from) && /^src\/(ui|cockpit)\//.test(e.to));
  assert.deepEqual(
    bad.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

test('the reference trainer imports nothing from src/ outside itself', () => {
  const bad = edges.filter(
    (e) =>
      e.from.startsWith('src/trainer/reference/') &&
      e.to.startsWith('src/') &&
      !e.to.startsWith('src/trainer/reference/'),
  );
  assert.deepEqual(
    bad.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

test('nothing below src/commands imports it (domain errors are src/errors.ts, mapped by the CLI)', () => {
  const bad = edges.filter(
    (e) => !e.from.startsWith('src/commands/') && e.from !== 'src/cli.ts' && e.to.startsWith('src/commands/'),
  );
  assert.deepEqual(
    bad.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

test('src/remote knows machines, not runs: it imports nothing from src/trainer, src/checks or src/cockpit', () => {
  const bad = valueEdges.filter(
    (e) => e.from.startsWith('src/remote/') && /^src\/(trainer|checks|cockpit)\//.test(e.to),
  );
  assert.deepEqual(
    bad.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

test('src/trainer imports nothing from src/checks, types included: the judge is above the data (a verdict the trainer needs is handed down)', () => {
  const bad = edges.filter((e) => e.from.startsWith('src/trainer/') && e.to.startsWith('src/checks/'));
  assert.deepEqual(
    bad.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

test('src/ui takes only types from src/trainer: what it shows of a run is handed in, its verdicts come through checks/present.ts', () => {
  const bad = valueEdges.filter((e) => e.from.startsWith('src/ui/') && e.to.startsWith('src/trainer/'));
  assert.deepEqual(
    bad.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

/** src/trainer's floors, top to bottom: starting a run uses acting on it, which uses reading it. */
const TRAINER_FLOORS = ['launch', 'control', 'run'];
test('inside src/trainer the folders import one way: launch → control → run (value imports)', () => {
  const floor = (f: string) => TRAINER_FLOORS.indexOf(f.split('/')[2] ?? '');
  const back = valueEdges.filter(
    (e) =>
      e.from.startsWith('src/trainer/') &&
      e.to.startsWith('src/trainer/') &&
      floor(e.from) >= 0 &&
      floor(e.to) >= 0 &&
      floor(e.to) < floor(e.from),
  );
  assert.deepEqual(
    back.map((e) => `${e.from} → ${e.to}`),
    [],
  );
});

test('src/replay reads through a Host and the Observer; it never writes and never signals: no Host effect called, no writer imported', () => {
  const replay = files.filter(under('src/replay/'));
  assert.ok(replay.includes('src/replay/asof.ts'), 'the replay folder is there');
  // the Host's effects, called on anything (AsOfHost defines them only to refuse: `signal(): …`)
  const EFFECT = /\.\s*(signal|writeFile|appendFile|mkdirp|remove|writeOwn|removeOwn)\s*\(|\baudited\s*\(/;
  const WRITERS =
    /^(src\/trainer\/control\/(ownfiles|control|actions|requests)\.ts|src\/trainer\/launch\/|src\/cockpit\/(actions|collector|watchdog|notify)\.ts)/;
  const bad: string[] = [];
  for (const f of replay) {
    const code = readFileSync(join(ROOT, f), 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    code.split('\n').forEach((l, i) => {
      if (EFFECT.test(l)) bad.push(`${f}:${i + 1}: ${l.trim()}`);
    });
  }
  for (const e of valueEdges)
    if (
      e.from.startsWith('src/replay/') &&
      (WRITERS.test(e.to) || /^(node:)?(fs|fs\/promises|child_process|net|http)$/.test(e.to))
    )
      bad.push(`${e.from} → ${e.to}`);
  // no fs of its own either: every read goes through the Host
  assert.deepEqual(bad, []);
  // and the rule can fail: the checker sees a call and a refusing definition apart
  assert.equal(EFFECT.test('await host.signal(pid, "SIGUSR1")'), true);
  assert.equal(EFFECT.test('  signal(): Promise<void> {'), false);
});
