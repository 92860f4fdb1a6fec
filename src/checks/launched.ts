// What a run was launched with, parsed from its run.info text (pure; the commands and the cockpit
// read the file). Feeds CheckInput.launched so the identity rule can catch a wrong CONFIG.
import type { Launched } from './context.js';

/**
 * What a supervised run was launched with, from its run.info (src/trainer/launch/launch.ts):
 * `config:` and the `env:` lines. Only for the real trainer: the reference trainer records the
 * config it wrote into its out_dir, so a name comparison would mean nothing there.
 */
export function launchedFromRunInfo(text: string): Launched | undefined {
  let trainer: string | null = null;
  let config: string | null | undefined;
  const flags: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const m = /^([a-z_]+):\s?(.*)$/.exec(raw);
    if (!m) continue;
    const [, key, v] = m as unknown as [string, string, string];
    if (key === 'trainer') trainer = v.trim();
    else if (key === 'config' && config === undefined) {
      const c = v.replace(/\s+#.*$/, '').trim();
      config = c === '' || c === '(none)' ? null : unquote(c);
    } else if (key === 'env') {
      const e = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(v.trim());
      if (e && /^NSA_/.test(e[1]!) && !/^NSA_TOP_/.test(e[1]!)) flags[e[1]!] = unquote(e[2]!);
    }
  }
  if (trainer !== 'nsa-vibe') return undefined;
  const l: Launched = {};
  if (config !== undefined) l.config = config;
  if (Object.keys(flags).length) l.flags = flags;
  return Object.keys(l).length ? l : undefined;
}

function unquote(s: string): string {
  const t = s.trim();
  if (t.length >= 2 && t.startsWith("'") && t.endsWith("'")) return t.slice(1, -1).replace(/'\\''/g, "'");
  if (t.length >= 2 && t.startsWith('"') && t.endsWith('"')) return t.slice(1, -1);
  return t;
}
