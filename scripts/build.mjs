// Bundles src/cli.ts into dist/cli.js so that `nsa-top` starts without a TypeScript loader.
// Dependencies stay external (they are installed by npm ci), except the pure-JS parsers (zod, yaml):
// loaded from node_modules as dozens of small modules they cost `status` ~40 ms of a ~70 ms bare
// node start (medians of 10, interleaved); bundled into our chunk, ~20 ms. The run readers no
// longer import zod at all (readers/shape.ts): status, watchdog and the cockpit's readers load yaml
// only for a config outside readers/yamlsimple.ts's subset, and then from node_modules (createRequire
// in readers/config.ts: status.cjs leaves its ~260 KB out); zod stays for profiles, preflight and
// the reference trainer's config.
// Code splitting follows the commands' dynamic imports, so a trainer rank or the supervisor loads
// only its own chunk — not ink, react and ssh2 — which keeps their start-up and RSS small.
import { build } from 'esbuild';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const BUNDLED = ['zod', 'yaml'];
const dist = join(root, 'dist');
mkdirSync(dist, { recursive: true });
// everything in package.json's dependencies but BUNDLED stays external (native modules, React/Ink)
const externals = Object.keys(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).dependencies).filter(
  (d) => !BUNDLED.includes(d),
);
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
  external: externals,
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
// `status` also as one CommonJS file, dist/status.cjs, which bin/nsa-top.js runs for `nsa-top status`
// (cli.js's chunks stay its fallback). status is a one-shot look whose start-up is most of its cost
// (issue 19: <= 3x a bare node start), and the same code loads cheaper this way: on the ddp2
// fixture 168-175 ms of CPU against 185-187 ms through cli.js's ~30 ES module chunks (each
// resolved, linked and compiled as a module), and 217-229 ms as one ES module file (medians of
// 15-21, interleaved, this 2-core box). It is src/cli.ts with every command but status left out
// (only status is dispatched through it), written under a temporary name and renamed into place, so
// a status starting during a rebuild reads the old file or the new one, whole.
const statusCjs = join(dist, 'status.cjs');
rmSync(statusCjs, { force: true }); // a build that fails below leaves cli.js, never an older status.cjs
const tmpCjs = join(dist, `status.cjs.${process.pid}.tmp`);
const statusBuild = await build({
  metafile: true,
  entryPoints: [join(root, 'src/cli.ts')],
  outfile: tmpCjs,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  external: externals,
  plugins: [
    {
      name: 'status-only',
      setup(b) {
        b.onResolve({ filter: /^\.\/commands\/[\w-]+\.js$/ }, (a) =>
          a.kind === 'dynamic-import' &&
          a.importer === join(root, 'src/cli.ts') &&
          !/^\.\/commands\/(status|progress)\.js$/.test(a.path)
            ? { path: a.path, external: true }
            : undefined,
        );
      },
    },
  ],
  jsx: 'automatic',
  logLevel: 'warning',
  legalComments: 'none',
  // the file sits in dist/ beside cli.js: import.meta.url names it as the ES module there would
  define: { 'import.meta.url': '__nsaTopMetaUrl' },
  banner: { js: "var __nsaTopMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
});
// The profiles' zod (~750 KB with its locales) must not reach status: it did once, through the
// multi-node launch's record reader, and status cost 50 ms more.
const zod = Object.keys(statusBuild.metafile.inputs).find((i) => i.startsWith('node_modules/zod/'));
if (zod) {
  rmSync(tmpCjs, { force: true });
  throw new Error(
    `build: status loads zod (${zod}); import what status needs from a module that does not import profiles`,
  );
}
renameSync(tmpCjs, statusCjs);
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
