// The trainer's YAML config (model/nsa/train/runtime/data sections) when a copy sits in the run
// dir. Every key is optional: the real configs differ (see contract §4.2).
import { createRequire } from 'node:module';
import type { ModelDims, NsaDims, TrainCfg } from '../snapshot.js';
import type { ParseResult } from './heartbeat.js';
import { jsonTooDeep, MAX_JSON_DEPTH } from './jsonfiles.js';
import { num, str, tolerantObject, type Shape } from './shape.js';
import { parseSimpleYaml } from './yamlsimple.js';

// every section and every key optional and tolerant on its own (shape.ts: tolerantObject)
const TRAINER_CONFIG: Shape = {
  model: { shape: { dim: num, n_layers: num, n_heads: num, n_kv_groups: num, d_k: num, d_v: num, vocab_size: num } },
  nsa: { shape: { l: num, d: num, l_sel: num, n_sel: num, w: num, phi: str } },
  data: { shape: { tokenizer: str } },
  runtime: { shape: { device: str, precision: str } },
  train: {
    shape: {
      steps: num,
      seq_len: num,
      batch_size: num,
      accumulate_grad_batches: num,
      lr: num,
      warmup_steps: num,
      log_every: num,
      eval_every: num,
      save_every: num,
      out_dir: str,
    },
  },
};
type Loose<T> = T & { [k: string]: unknown };
export type TrainerConfig = Loose<{
  model?:
    | Loose<{
        dim?: number | undefined;
        n_layers?: number | undefined;
        n_heads?: number | undefined;
        n_kv_groups?: number | undefined;
        d_k?: number | undefined;
        d_v?: number | undefined;
        vocab_size?: number | undefined;
      }>
    | undefined;
  nsa?:
    | Loose<{
        l?: number | undefined;
        d?: number | undefined;
        l_sel?: number | undefined;
        n_sel?: number | undefined;
        w?: number | undefined;
        phi?: string | undefined;
      }>
    | undefined;
  data?: Loose<{ tokenizer?: string | undefined }> | undefined;
  runtime?: Loose<{ device?: string | undefined; precision?: string | undefined }> | undefined;
  train?:
    | Loose<{
        steps?: number | undefined;
        seq_len?: number | undefined;
        batch_size?: number | undefined;
        accumulate_grad_batches?: number | undefined;
        lr?: number | undefined;
        warmup_steps?: number | undefined;
        log_every?: number | undefined;
        eval_every?: number | undefined;
        save_every?: number | undefined;
        out_dir?: string | undefined;
      }>
    | undefined;
}>;

/**
 * true when YAML nests deeper than MAX_JSON_DEPTH, in flow ([ {) or block (`- - -`, indentation)
 * form. The yaml parser recurses per level: ~2000 levels of `- ` overflow its stack, and building
 * that error message once took the process down (V8 "RegExpCompiler Allocation failed").
 */
export function yamlTooDeep(text: string): boolean {
  if (jsonTooDeep(text)) return true;
  for (const line of text.split('\n')) {
    let depth = 0;
    let i = 0;
    for (; i < line.length; i++) {
      const c = line.charCodeAt(i);
      if (c === 32 || c === 9) continue;
      // a block indicator followed by a blank opens one more level on the same line
      if ((c === 45 || c === 63 || c === 58) && (line.charCodeAt(i + 1) === 32 || line.charCodeAt(i + 1) === 9)) {
        depth++;
        continue;
      }
      break;
    }
    // two columns of indentation per level at least
    if (depth > MAX_JSON_DEPTH || i > 2 * MAX_JSON_DEPTH + 2 * depth) return true;
  }
  return false;
}

/**
 * The yaml library, loaded on the first config outside yamlsimple.ts's subset: from node_modules, not
 * bundled (scripts/build.mjs), so that a status whose config is in the subset neither compiles nor
 * initialises its ~260 KB; such a config then costs the library's load from its files.
 */
function yamlLibrary(): typeof import('yaml') {
  return createRequire(import.meta.url)('yaml') as typeof import('yaml');
}

export function parseTrainerConfig(text: string): ParseResult<TrainerConfig> {
  if (yamlTooDeep(text)) return { ok: false, error: `YAML nested deeper than ${MAX_JSON_DEPTH} levels: refused` };
  // the common configs without the yaml library's cold parser (yamlsimple.ts: the same answer or none)
  let doc: unknown = parseSimpleYaml(text);
  if (doc === undefined)
    try {
      // parseDocument never prints warnings (yaml's parse() sends them to process.emitWarning,
      // which would scribble over the cockpit)
      const { parseDocument } = yamlLibrary();
      const d = parseDocument(text, { prettyErrors: false });
      if (d.errors.length) return { ok: false, error: `YAML: ${d.errors[0]!.message.split('\n')[0]!.slice(0, 120)}` };
      doc = d.toJS({ maxAliasCount: 100 });
    } catch (e) {
      return { ok: false, error: `YAML: ${(e as Error).message.split('\n')[0]!.slice(0, 120)}` };
    }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    return { ok: false, error: 'YAML is not a mapping' };
  const r = tolerantObject(doc, TRAINER_CONFIG);
  if (!r) return { ok: false, error: 'unexpected config shape' };
  return { ok: true, value: r as TrainerConfig };
}

export function modelDims(c: TrainerConfig, tokenizer: string | null, dataset: string | null): ModelDims | null {
  const m = c.model;
  if (!m || m.dim === undefined) return null;
  const tok = tokenizer ?? c.data?.tokenizer ?? 'byte';
  // GPT-2 BPE is used only with --dataset fineweb_edu (contract §4.1)
  const vocab = m.vocab_size ?? (tok === 'gpt2' && (dataset === null || dataset === 'fineweb_edu') ? 50257 : 256);
  return {
    dim: m.dim,
    nLayers: m.n_layers ?? 1,
    nHeads: m.n_heads ?? 0,
    nKvGroups: m.n_kv_groups ?? 0,
    dK: m.d_k ?? 0,
    dV: m.d_v ?? 0,
    vocab,
  };
}

export function nsaDims(c: TrainerConfig): NsaDims | null {
  const n = c.nsa;
  if (!n || n.l === undefined) return null;
  return { l: n.l, d: n.d ?? 0, lSel: n.l_sel ?? 0, nSel: n.n_sel ?? 0, w: n.w ?? 0 };
}

export function trainCfg(c: TrainerConfig): TrainCfg | null {
  const t = c.train;
  if (!t) return null;
  return {
    steps: t.steps ?? null,
    seqLen: t.seq_len ?? null,
    batchSize: t.batch_size ?? null,
    accum: t.accumulate_grad_batches ?? 1,
    lr: t.lr ?? null,
    warmupSteps: t.warmup_steps ?? 0,
    logEvery: t.log_every ?? null,
    evalEvery: t.eval_every ?? 0,
    saveEvery: t.save_every ?? 0,
    outDir: t.out_dir ?? null,
  };
}

/**
 * Where the YAML that env.json's CONFIG names may be, best first. The real trainer reads CONFIG
 * relative to its working directory, which only the live process tells (/proc/PID/cwd); after it
 * exits, the runbooks' conventions remain: the trainer runs from the repo root and writes under
 * `artifacts/<name>/`, so an ancestor of the out dir (or NSA_VIBE_SRC, or the launcher dir) is the
 * base. An absolute CONFIG is itself the only candidate.
 */
export function configCandidates(
  config: string,
  o: { cwd?: string | null; outDir: string; bases?: (string | null | undefined)[] },
): { path: string; base: string }[] {
  const isAbs = config.startsWith('/');
  const out: { path: string; base: string }[] = [];
  if (isAbs) {
    // an absolute out_dir in it needs no base; a relative one is relative to the trainer's cwd
    out.push({ path: joinPosix('/', config), base: o.cwd ?? '/' });
    return out;
  }
  const add = (base: string | null | undefined) => {
    if (!base) return;
    const p = joinPosix(base, config);
    if (!out.some((x) => x.path === p)) out.push({ path: p, base });
  };
  add(o.cwd);
  for (const b of o.bases ?? []) add(b);
  let d = o.outDir;
  for (let i = 0; i < 5; i++) {
    const up = d.replace(/\/[^/]*\/?$/, '') || '/';
    if (up === d) break;
    add(up);
    d = up;
  }
  return out;
}

function joinPosix(base: string, rel: string): string {
  const parts = (base.replace(/\/+$/, '') + '/' + rel).split('/');
  const out: string[] = [];
  for (const p of parts) {
    if (p === '' || p === '.') continue;
    if (p === '..') out.pop();
    else out.push(p);
  }
  return '/' + out.join('/');
}

/** the config's train.out_dir, resolved against `base`, is `outDir`: the file belongs to this run */
export function configNamesOutDir(c: TrainerConfig, base: string, outDir: string): boolean {
  const o = c.train?.out_dir;
  if (!o) return false;
  const norm = (p: string) => p.replace(/\/+$/, '');
  return norm(o.startsWith('/') ? joinPosix('/', o) : joinPosix(base, o)) === norm(outDir);
}
