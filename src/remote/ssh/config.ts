// `--host user@box[:port]` and ~/.ssh/config Host aliases (HostName, User, Port, IdentityFile),
// resolved the way OpenSSH does: the command line wins, then the first value the config gives for
// each keyword (IdentityFile accumulates), then the defaults. A bad --host or a missing -i key is
// bad input (InputError: one line, exit 2 in every command).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { InputError } from '../../errors.js';

export interface HostSpec {
  user?: string;
  host: string;
  port?: number;
}

/** `user@box`, `box:2222`, `user@box:2222`, `[::1]:2222`, `user@[fe80::1]`. */
export function parseHostSpec(spec: string): HostSpec {
  const s = spec.trim();
  if (!s) throw new InputError('empty --host');
  if (/[\s'"`$;&|<>\\]/.test(s))
    throw new InputError(`invalid --host ${JSON.stringify(spec)}: expected user@box[:port]`);
  let user: string | undefined;
  let rest = s;
  const at = s.lastIndexOf('@');
  if (at >= 0) {
    user = s.slice(0, at);
    rest = s.slice(at + 1);
    if (!user) throw new InputError(`invalid --host ${JSON.stringify(spec)}: empty user before @`);
  }
  let host = rest;
  let port: number | undefined;
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(rest);
  if (v6) {
    host = v6[1]!;
    if (v6[2]) port = Number(v6[2]);
  } else {
    const colons = rest.split(':').length - 1;
    if (colons === 1) {
      const [h, p] = rest.split(':');
      host = h!;
      if (!/^\d+$/.test(p!)) throw new InputError(`invalid --host ${JSON.stringify(spec)}: port must be a number`);
      port = Number(p);
    }
  }
  if (!host) throw new InputError(`invalid --host ${JSON.stringify(spec)}: no host name`);
  if (port !== undefined && (port < 1 || port > 65535))
    throw new InputError(`invalid port ${port} in --host ${JSON.stringify(spec)}`);
  return { user, host, port };
}

interface ConfigLine {
  key: string;
  args: string[];
}

function splitArgs(s: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s)) !== null) out.push(m[1] ?? m[2]!);
  return out;
}

function parseLines(text: string): ConfigLine[] {
  const out: ConfigLine[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([A-Za-z][A-Za-z0-9]*)\s*(?:=\s*|\s+)(.*)$/.exec(line);
    if (!m) continue;
    out.push({ key: m[1]!.toLowerCase(), args: splitArgs(m[2]!) });
  }
  return out;
}

function globToRe(p: string): RegExp {
  return new RegExp(
    `^${p
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
    'i',
  );
}

/** OpenSSH Host pattern list: any negated match excludes; otherwise any positive match includes. */
export function hostMatches(patterns: string[], host: string): boolean {
  let pos = false;
  for (const p of patterns) {
    if (p.startsWith('!')) {
      if (globToRe(p.slice(1)).test(host)) return false;
    } else if (globToRe(p).test(host)) pos = true;
  }
  return pos;
}

export interface SshConfigResult {
  hostName?: string;
  user?: string;
  port?: number;
  identityFiles: string[];
  /** IdentitiesOnly yes: do not offer agent keys */
  identitiesOnly?: boolean;
}

export interface ResolveOptions {
  home?: string;
  /** read an Include'd file; defaults to the file system */
  readInclude?: (path: string) => string[] /* contents of each matched file */;
}

function expandIncludes(pattern: string, home: string): string[] {
  const p = pattern.startsWith('~')
    ? join(home, pattern.slice(1))
    : isAbsolute(pattern)
      ? pattern
      : join(home, '.ssh', pattern);
  if (!/[*?]/.test(p)) return existsSync(p) ? [readFileSync(p, 'utf8')] : [];
  const dir = dirname(p);
  const re = globToRe(p.slice(dir.length + 1));
  try {
    return readdirSync(dir)
      .filter((n) => re.test(n))
      .sort()
      .map((n) => readFileSync(join(dir, n), 'utf8'));
  } catch {
    return [];
  }
}

/** Resolve an alias against the text of an ssh config (Match blocks are skipped). */
export function resolveSshConfig(text: string, alias: string, opts: ResolveOptions = {}): SshConfigResult {
  const home = opts.home ?? homedir();
  const res: SshConfigResult = { identityFiles: [] };
  const walk = (t: string, depth: number) => {
    let active = true; // lines before the first Host apply to every host
    for (const { key, args } of parseLines(t)) {
      if (key === 'host') {
        active = hostMatches(args, alias);
        continue;
      }
      if (key === 'match') {
        active = false;
        continue;
      }
      if (!active) continue;
      const v = args[0];
      if (v === undefined) continue;
      switch (key) {
        case 'include':
          if (depth < 8)
            for (const a of args)
              for (const inc of (opts.readInclude ?? ((pp: string) => expandIncludes(pp, home)))(a))
                walk(inc, depth + 1);
          break;
        case 'hostname':
          res.hostName ??= v;
          break;
        case 'user':
          res.user ??= v;
          break;
        case 'port':
          if (res.port === undefined && /^\d+$/.test(v)) res.port = Number(v);
          break;
        case 'identityfile':
          if (v.toLowerCase() !== 'none') res.identityFiles.push(v);
          break;
        case 'identitiesonly':
          res.identitiesOnly ??= v.toLowerCase() === 'yes';
          break;
      }
    }
  };
  walk(text, 0);
  return res;
}

export interface SshTarget {
  /** what the user typed (alias or host) */
  alias: string;
  /** the host actually connected to (HostName from the config, else the alias) */
  hostName: string;
  user: string;
  port: number;
  /** private key files to try, in order (-i first); only those that exist */
  identityFiles: string[];
  identitiesOnly: boolean;
  label: string;
}

function expandTokens(
  s: string,
  t: { home: string; host: string; alias: string; user: string; localUser: string; port: number },
): string {
  let out = s.startsWith('~/') || s === '~' ? t.home + s.slice(1) : s;
  out = out.replace(/%([%dhnupr])/g, (_m, c: string) =>
    c === '%'
      ? '%'
      : c === 'd'
        ? t.home
        : c === 'h'
          ? t.host
          : c === 'n'
            ? t.alias
            : c === 'u'
              ? t.localUser
              : c === 'p'
                ? String(t.port)
                : t.user,
  );
  return out;
}

export function resolveTarget(
  spec: string,
  opts: { identity?: string; port?: number; configText?: string; home?: string; localUser?: string } = {},
): SshTarget {
  const home = opts.home ?? homedir();
  const localUser = opts.localUser ?? userInfo().username;
  const hs = parseHostSpec(spec);
  let text = opts.configText;
  if (text === undefined) {
    const p = join(home, '.ssh', 'config');
    text = existsSync(p) ? readFileSync(p, 'utf8') : '';
  }
  const cfg = resolveSshConfig(text, hs.host, { home });
  const port = hs.port ?? opts.port ?? cfg.port ?? 22;
  const user = hs.user ?? cfg.user ?? localUser;
  const hostName = cfg.hostName
    ? expandTokens(cfg.hostName, { home, host: hs.host, alias: hs.host, user, localUser, port })
    : hs.host;
  const tok = { home, host: hostName, alias: hs.host, user, localUser, port };
  const ids: string[] = [];
  if (opts.identity) ids.push(expandTokens(opts.identity, tok));
  for (const f of cfg.identityFiles) ids.push(expandTokens(f, tok));
  if (cfg.identityFiles.length === 0 && !opts.identity) {
    for (const d of ['id_ed25519', 'id_ecdsa', 'id_rsa']) ids.push(join(home, '.ssh', d));
  }
  const existing = [...new Set(ids)].filter((f) => existsSync(f));
  if (opts.identity && !existsSync(expandTokens(opts.identity, tok)))
    throw new InputError(`identity file not found: ${opts.identity}`);
  return {
    alias: hs.host,
    hostName,
    user,
    port,
    identityFiles: existing,
    identitiesOnly: cfg.identitiesOnly ?? false,
    label: `${user}@${hs.host}${port !== 22 ? `:${port}` : ''}`,
  };
}
