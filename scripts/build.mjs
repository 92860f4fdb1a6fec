// Bundles src/cli.ts into dist/cli.js so that `nsa-top` starts without a TypeScript loader.
// Dependencies stay external (they are installed by npm ci); only our own code is bundled.
// Code splitting follows the commands' dynamic imports, so a trainer rank or the supervisor loads
// only its own chunk — not ink, react and ssh2 — which keeps their start-up and RSS small.
import { build } from 'esbuild';
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
// Old chunks would pile up across builds: clear only the files this build writes.
if (existsSync(dist)) for (const f of readdirSync(dist)) if (/^(chunk-.*|cli)\.js(\.map)?$/.test(f)) rmSync(join(dist, f));
mkdirSync(dist, { recursive: true });
await build({
  entryPoints: [join(root, 'src/cli.ts')],
  outdir: dist,
  entryNames: '[name]',
  chunkNames: 'chunk-[hash]',
  splitting: true,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  jsx: 'automatic',
  sourcemap: 'linked',
  logLevel: 'warning',
  legalComments: 'none',
});
// Built WebAssembly kernels of the reference trainer travel next to the bundle.
const kdir = join(root, 'src/trainer/reference/kernels');
if (existsSync(kdir)) {
  for (const f of readdirSync(kdir)) if (f.endsWith('.wasm')) copyFileSync(join(kdir, f), join(dist, f));
}
