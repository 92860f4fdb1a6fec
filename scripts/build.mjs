// Bundles src/cli.ts into dist/cli.js so that `nsa-top` starts without a TypeScript loader.
// Dependencies stay external (they are installed by npm ci), except the pure-JS parsers (zod, yaml):
// loaded from node_modules as dozens of small modules they cost `status` ~40 ms of a ~70 ms bare
// node start (medians of 10, interleaved); bundled into our chunk, ~20 ms. The run readers no
// longer import zod at all (readers/shape.ts): status, watchdog and the cockpit's readers load yaml
// only; zod stays for profiles, preflight and the reference trainer's config.
// Code splitting follows the commands' dynamic imports, so a trainer rank or the supervisor loads
// only its own chunk — not ink, react and ssh2 — which keeps their start-up and RSS small.
import { build } from 'esbuild';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const BUNDLED = ['zod', 'yaml'];
const dist = join(root, 'dist');
mkdirSync(dist, { recursive: true });
const result = await build({
  metafile: true,
  entryPoints: [join(root, 'src/cli.ts')],
  outdir: dist,
  entryNames: '[name]',
  chunkNames: 'chunk-[hash]',
  splitting: true,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // everything in package.json's dependencies but BUNDLED stays external (native modules, React/Ink)
  external: Object.keys(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).dependencies).filter(
    (d) => !BUNDLED.includes(d),
  ),
  jsx: 'automatic',
  sourcemap: 'linked',
  logLevel: 'warning',
  legalComments: 'none',
  // the bundled CommonJS (yaml) calls require('process'): give each ESM chunk a real require
  banner: {
    js: "import { createRequire as __nsaTopRequire } from 'node:module'; const require = __nsaTopRequire(import.meta.url);",
  },
});
// A bundled CommonJS package reached by a dynamic import() lands in a chunk whose only export is
// `default` (esbuild), so `const { x } = await import('pkg')` would be undefined at run time: refuse.
for (const out of Object.keys(result.metafile.outputs)) {
  if (out.endsWith('.js') && /^export default require_/m.test(readFileSync(out, 'utf8')))
    throw new Error(
      `build: ${out} is a bundled CommonJS package behind a dynamic import(); import it statically or through one of our modules`,
    );
}
// `status` is a one-shot look whose start-up is its cost (target: <= 3x a bare node start): the
// profiles' zod (~750 KB with its locales) must not reach it through a static import. It did once,
// through the multi-node launch's record reader, and status cost 50 ms more.
{
  const outs = result.metafile.outputs;
  const entry = Object.keys(outs).find((o) => outs[o].entryPoint === 'src/commands/status.ts');
  const seen = new Set(entry ? [entry] : []);
  for (const o of seen)
    for (const i of outs[o].imports) if (i.kind === 'import-statement' && outs[i.path]) seen.add(i.path);
  const heavy = [...seen].flatMap((o) => Object.keys(outs[o].inputs).filter((i) => i.startsWith('node_modules/zod/')));
  if (!entry || heavy.length)
    throw new Error(
      entry
        ? `build: status loads zod (${heavy[0]}); import what status needs from a module that does not import profiles`
        : 'build: no output for src/commands/status.ts',
    );
}
// Chunks of earlier builds would pile up: remove them only after the new ones are written, so a
// process starting during a rebuild never finds dist/cli.js or its chunks missing.
const written = new Set(Object.keys(result.metafile.outputs).map((o) => resolve(o)));
for (const f of readdirSync(dist)) {
  const p = join(dist, f);
  if (/^chunk-.*\.js(\.map)?$/.test(f) && !written.has(p)) rmSync(p);
}
// Built WebAssembly kernels of the reference trainer travel next to the bundle.
const kdir = join(root, 'src/trainer/reference/kernels');
if (existsSync(kdir)) {
  for (const f of readdirSync(kdir)) if (f.endsWith('.wasm')) copyFileSync(join(kdir, f), join(dist, f));
}
