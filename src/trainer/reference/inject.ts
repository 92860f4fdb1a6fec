// Fault injection specs (`--inject`), for drills and tests. Each leaves the traces a real run would.

export type Injection =
  | { kind: 'hang'; step: number; rank: number | null }
  | { kind: 'nan'; step: number; rank: number | null }
  | { kind: 'crash'; step: number; rank: number | null }
  | { kind: 'gate-collapse'; step: number; rank: number | null }
  | { kind: 'slow-data'; ms: number; rank: number | null }
  | { kind: 'leak'; mb: number; rank: number | null }
  | { kind: 'slow'; x: number; rank: number | null };

const KINDS: Record<string, { need: 'step' | 'ms' | 'mb' | 'x' }> = {
  hang: { need: 'step' },
  nan: { need: 'step' },
  crash: { need: 'step' },
  'gate-collapse': { need: 'step' },
  'slow-data': { need: 'ms' },
  leak: { need: 'mb' },
  slow: { need: 'x' },
};

const FORMS =
  'hang@step=K[,rank=R], nan@step=K, crash@step=K, gate-collapse@step=K, slow-data@ms=M, leak@mb=M, slow@x=F[,rank=R]';

export function parseInjection(spec: string): Injection {
  const bad = (why: string): never => {
    throw new Error(`--inject '${spec}': ${why} (forms: ${FORMS})`);
  };
  const at = spec.indexOf('@');
  if (at <= 0) bad('expected KIND@key=value');
  const kind = spec.slice(0, at);
  const def = KINDS[kind];
  if (!def) bad(`unknown kind '${kind}'`);
  const params = new Map<string, number>();
  for (const part of spec.slice(at + 1).split(',')) {
    const m = /^([a-z]+)=(\d+(?:\.\d+)?)$/.exec(part.trim());
    if (!m) bad(`cannot read '${part}' (expected key=number)`);
    const [, key, val] = m!;
    if (params.has(key!)) bad(`'${key}' given twice`);
    if (key !== def!.need && key !== 'rank') bad(`'${key}' does not apply to ${kind}`);
    params.set(key!, Number(val));
  }
  const v = params.get(def!.need);
  if (v === undefined) bad(`${kind} needs ${def!.need}=`);
  const rank = params.get('rank') ?? null;
  if (rank !== null && !Number.isInteger(rank)) bad('rank must be an integer');
  if (def!.need === 'step' && (!Number.isInteger(v) || v! < 1)) bad('step must be an integer >= 1');
  if (def!.need === 'ms' && v! <= 0) bad('ms must be > 0');
  if (def!.need === 'mb' && v! <= 0) bad('mb must be > 0');
  // a factor of 1 changes nothing and above 100 a step would outlast any stall threshold: both are typos
  if (def!.need === 'x' && (v! <= 1 || v! > 100)) bad('x must be > 1 and <= 100');
  switch (kind) {
    case 'slow-data':
      return { kind, ms: v!, rank };
    case 'leak':
      return { kind, mb: v!, rank };
    case 'slow':
      return { kind, x: v!, rank };
    default:
      return { kind: kind as 'hang' | 'nan' | 'crash' | 'gate-collapse', step: v!, rank };
  }
}

export function parseInjections(specs: string[]): Injection[] {
  return specs.map(parseInjection);
}

export function formatInjection(i: Injection): string {
  const r = i.rank === null ? '' : `,rank=${i.rank}`;
  if (i.kind === 'slow-data') return `slow-data@ms=${i.ms}${r}`;
  if (i.kind === 'leak') return `leak@mb=${i.mb}${r}`;
  if (i.kind === 'slow') return `slow@x=${i.x}${r}`;
  return `${i.kind}@step=${i.step}${r}`;
}

/** The injections that concern one rank. */
export function forRank(all: Injection[], rank: number): Injection[] {
  return all.filter((i) => i.rank === null || i.rank === rank);
}
