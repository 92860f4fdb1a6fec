// The trainer config env.json's CONFIG names, for runs nsa-top did not launch (no config.yaml in
// the run dir): CONFIG is relative to the trainer's working directory, so it is looked for there
// (once known), next to the launcher's log, under NSA_VIBE_SRC and the run dir; the file whose
// out_dir is this run dir wins.
import type { Host } from '../../remote/host.js';
import { configCandidates, configNamesOutDir, parseTrainerConfig, type TrainerConfig } from './readers/config.js';
import type { EnvJson } from './readers/jsonfiles.js';
import { WHOLE_FILE_CAP } from './parsed.js';

export class EnvConfig {
  /** the config found, or null */
  found: { path: string; cfg: TrainerConfig } | null = null;
  /** what `found` was resolved for (CONFIG + cwd): resolved again only when that changes */
  private key: string | null = null;
  private trainerCwd: string | null = null;
  /** no cwd known and nothing found yet: look again now and then (the file may appear later) */
  private looks = 0;

  constructor(
    private readonly host: Host,
    private readonly runDir: string,
    /** the directory of the trainer's log when it lives outside the run dir */
    private readonly logDir: string | null,
  ) {}

  /** true when the cwd changed */
  setTrainerCwd(cwd: string): boolean {
    if (cwd === this.trainerCwd) return false;
    this.trainerCwd = cwd;
    return true;
  }

  /** looks CONFIG up when it (or the cwd) changed; `runConfig`: the run dir has its own config.yaml, which wins */
  async resolve(env: EnvJson | null, runConfig: boolean): Promise<void> {
    const c = (env?.env as Record<string, unknown> | undefined)?.['CONFIG'];
    if (typeof c !== 'string' || c === '' || c.length > 4096 || c.includes('\0')) {
      this.found = null;
      this.key = null;
      return;
    }
    if (runConfig) return;
    const key = `${c}\n${this.trainerCwd ?? ''}`;
    if (key === this.key && (this.found || ++this.looks % 30 !== 0)) return;
    this.key = key;
    const src = (env?.env as Record<string, unknown>)['NSA_VIBE_SRC'];
    const bases = [this.logDir, typeof src === 'string' ? src : null];
    const cands = configCandidates(c, { cwd: this.trainerCwd, outDir: this.runDir, bases }).slice(0, 12);
    let first: { path: string; cfg: TrainerConfig } | null = null;
    for (const { path, base } of cands) {
      const st = await this.host.stat(path).catch(() => null);
      if (!st?.isFile || st.size > WHOLE_FILE_CAP) continue;
      const text = await this.host
        .readFile(path, WHOLE_FILE_CAP)
        .then((b) => b.toString('utf8'))
        .catch(() => null);
      if (text === null) continue;
      const p = parseTrainerConfig(text);
      if (!p.ok) continue;
      const hit = { path, cfg: p.value };
      // the file whose out_dir is this run dir is this run's config, wherever it was found
      if (configNamesOutDir(p.value, base, this.runDir)) {
        first = hit;
        break;
      }
      first ??= hit;
    }
    this.found = first;
  }
}
