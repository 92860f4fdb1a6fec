// Host key verification against OpenSSH known_hosts files (plain and hashed `|1|salt|hash`
// entries, comma-separated patterns, wildcards, negation, @revoked), like
// StrictHostKeyChecking=accept-new: an unknown key is refused unless the user asked to accept it
// (then it is appended); a changed key is always refused, and a host with a key of any type in
// known_hosts is never new (a key of another type is a changed key, as OpenSSH has it).
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { hostMatches } from './config.js';

/** The key type named inside an SSH wire-format public key blob (e.g. ssh-ed25519). */
export function keyType(blob: Buffer): string {
  if (blob.length < 4) return 'unknown';
  const n = blob.readUInt32BE(0);
  if (n > 64 || 4 + n > blob.length) return 'unknown';
  return blob.subarray(4, 4 + n).toString('latin1');
}

/** OpenSSH's SHA256 fingerprint: `SHA256:` + unpadded base64 of sha256(blob). */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** How known_hosts names a host: `box` on port 22, `[box]:port` otherwise. */
export function knownHostName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

interface Entry {
  marker: '' | '@revoked' | '@cert-authority';
  patterns: string;
  type: string;
  key: string;
}

function parseKnownHosts(text: string): Entry[] {
  const out: Entry[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const f = line.split(/\s+/);
    let marker: Entry['marker'] = '';
    if (f[0] === '@revoked' || f[0] === '@cert-authority') marker = f.shift() as Entry['marker'];
    if (f.length < 3) continue;
    out.push({ marker, patterns: f[0]!, type: f[1]!, key: f[2]! });
  }
  return out;
}

function hashedMatches(field: string, name: string): boolean {
  // |1|base64(salt)|base64(HMAC-SHA1(salt, name))
  const m = /^\|1\|([^|]+)\|([^|]+)$/.exec(field);
  if (!m) return false;
  try {
    const h = createHmac('sha1', Buffer.from(m[1]!, 'base64')).update(name).digest('base64');
    return h === m[2];
  } catch {
    return false;
  }
}

function entryMatches(e: Entry, name: string): boolean {
  if (e.patterns.startsWith('|')) return hashedMatches(e.patterns, name);
  return hostMatches(e.patterns.split(','), name);
}

export type HostKeyVerdict =
  | { status: 'known' }
  | { status: 'unknown' }
  /** `knownTypes`: the key types known_hosts holds for the host (the presented type among them or not) */
  | { status: 'changed'; knownTypes: string[] }
  | { status: 'revoked' };

/**
 * A host known_hosts names with any key, of any type, is never new: a key it does not hold is a
 * changed key, also when its type differs from every key held (a server that now offers only ecdsa
 * where ed25519 was recorded). That is OpenSSH's verdict (9.2: "REMOTE HOST IDENTIFICATION HAS
 * CHANGED", under StrictHostKeyChecking=accept-new too); only a host with no key at all is new.
 */
export function checkHostKey(texts: string[], host: string, port: number, blob: Buffer): HostKeyVerdict {
  const name = knownHostName(host, port);
  const type = keyType(blob);
  const b64 = blob.toString('base64');
  const entries = texts.flatMap(parseKnownHosts);
  if (entries.some((e) => e.marker === '@revoked' && e.key === b64)) return { status: 'revoked' };
  const mine = entries.filter((e) => e.marker === '' && entryMatches(e, name));
  if (mine.some((e) => e.type === type && e.key === b64)) return { status: 'known' };
  if (mine.length > 0) return { status: 'changed', knownTypes: [...new Set(mine.map((e) => e.type))] };
  return { status: 'unknown' };
}

/** Key types known_hosts holds for this host, to prefer them in the handshake (as OpenSSH does). */
export function knownTypesFor(texts: string[], host: string, port: number): string[] {
  const name = knownHostName(host, port);
  return [
    ...new Set(
      texts
        .flatMap(parseKnownHosts)
        .filter((e) => e.marker === '' && entryMatches(e, name))
        .map((e) => e.type),
    ),
  ];
}

export function readKnownHosts(paths: string[]): string[] {
  return paths.filter((p) => existsSync(p)).map((p) => readFileSync(p, 'utf8'));
}

/** Appends `host type key` (hashed when `hash`), creating ~/.ssh (0700) and the file (0600). */
export function appendKnownHost(path: string, host: string, port: number, blob: Buffer, hash = false): void {
  const dir = dirname(path);
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const name = knownHostName(host, port);
  let field = name;
  if (hash) {
    const salt = randomBytes(20);
    field = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`;
  }
  const existed = existsSync(path);
  let prefix = '';
  if (existed) {
    const cur = readFileSync(path, 'utf8');
    if (cur.length > 0 && !cur.endsWith('\n')) prefix = '\n';
  }
  appendFileSync(path, `${prefix}${field} ${keyType(blob)} ${blob.toString('base64')}\n`, { mode: 0o600 });
  if (!existed) chmodSync(path, 0o600);
}
