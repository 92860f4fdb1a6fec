// Secrets out of everything a bundle carries, pure. By name: a JSON key or `NAME=value` /
// `NAME: value` whose name says token, key, secret, password, credential, auth, webhook, cookie or
// session. By shape, wherever they appear: GitHub (ghp_…, github_pat_…), OpenAI/Anthropic (sk-…),
// Hugging Face (hf_…), Slack (xox?-…, hooks.slack.com), AWS access keys (AKIA…), JWTs, Discord
// webhooks, URLs with a user:password@ or a token-like query parameter.
export const REDACTED = '<redacted>';

/**
 * A name whose value is a secret (env var, JSON key, CLI option): one that says secret, password,
 * passphrase, credential, api/access/private key or webhook anywhere, or has TOKEN, KEY, AUTH,
 * COOKIE or PAT as one of its words (HF_TOKEN, hfToken, WANDB_API_KEY, AUTH_HEADER) — not
 * `tokenizer` or `tokens_per_s`.
 */
export function isSecretName(name: string): boolean {
  const up = name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
  if (/SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|WEBHOOK|^AUTH/.test(up)) return true;
  return up
    .split(/[^A-Z0-9]+/)
    .some((w) => w === 'TOKEN' || w === 'KEY' || w === 'AUTH' || w === 'COOKIE' || w === 'PAT');
}

const SHAPES: RegExp[] = [
  /\bgh[pousr]_[A-Za-z0-9]{20,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/g,
  /\bsk-[A-Za-z0-9_-]{16,}/g,
  /\bhf_[A-Za-z0-9]{16,}/g,
  /\bxox[abposr]-[A-Za-z0-9-]{8,}/g,
  /\b(AKIA|ASIA)[0-9A-Z]{16}\b/g,
  /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g,
  /https?:\/\/hooks\.slack\.com\/[^\s"'<>]+/g,
  /https?:\/\/(?:[a-z]+\.)?discord(?:app)?\.com\/api\/webhooks\/[^\s"'<>]+/g,
  /\bBearer\s+[A-Za-z0-9._~+/-]{8,}=*/gi,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
];

/** a URL's user:password@ */
const USERINFO = /([a-z][a-z0-9+.-]*:\/\/)[^/\s:@"']+:[^/\s@"']+@/gi;
/** a URL's token-like query parameter */
const QUERY =
  /([?&](?:[a-z0-9_-]*(?:token|key|secret|password|passwd|sig|signature|auth|credential)[a-z0-9_-]*)=)[^&\s"'#]+/gi;
/** NAME=value or NAME: value with a secret name (env dumps, run.info, logs, argv) */
const NAMED = /\b([A-Za-z_][A-Za-z0-9_.-]*)(\s*[=:]\s*|=)("[^"\n]*"|'[^'\n]*'|[^\s"',;}]+)/g;

/** "NAME": "value" in JSON text that does not parse (a tail, a broken line) */
const JSON_KEY = /"([A-Za-z_][A-Za-z0-9_.-]*)"(\s*:\s*)"((?:[^"\\\n]|\\.)*)"/g;

/** The text with every secret it shows replaced by <redacted>; `hits` counts the replacements. */
export function redactText(s: string, hits = { n: 0 }): string {
  let out = s;
  for (const re of SHAPES)
    out = out.replace(re, () => {
      hits.n++;
      return REDACTED;
    });
  out = out.replace(USERINFO, (_m, scheme: string) => {
    hits.n++;
    return `${scheme}${REDACTED}@`;
  });
  out = out.replace(QUERY, (_m, k: string) => {
    hits.n++;
    return `${k}${REDACTED}`;
  });
  out = out.replace(JSON_KEY, (m, name: string, sep: string, value: string) => {
    if (!isSecretName(name) || value === REDACTED || value === '') return m;
    hits.n++;
    return `"${name}"${sep}"${REDACTED}"`;
  });
  out = out.replace(NAMED, (m, name: string, sep: string, value: string) => {
    if (!isSecretName(name) || value === REDACTED || value === '' || /^(null|none|""|'')$/i.test(value)) return m;
    // a JSON key's own value (`"HF_TOKEN": "x"`) is handled by redactJson; here: shell/env/yaml text
    hits.n++;
    return `${name}${sep}${REDACTED}`;
  });
  return out;
}

/** A JSON value with every secret-named key's value and every secret-shaped string redacted. */
export function redactJson(v: unknown, hits = { n: 0 }): unknown {
  if (typeof v === 'string') return redactText(v, hits);
  if (Array.isArray(v)) return v.map((x) => redactJson(x, hits));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (isSecretName(k) && x !== null && x !== '' && typeof x !== 'boolean') {
        hits.n++;
        out[k] = REDACTED;
      } else out[k] = redactJson(x, hits);
    }
    return out;
  }
  return v;
}

/**
 * A file's text, redacted: JSON (a whole document, or one per line) by key and shape, anything else
 * by shape and `NAME=value`. A JSON string value that is itself a secret-named key's is caught by
 * both readings, so a line that is not JSON loses nothing.
 */
export function redactFile(text: string, hits = { n: 0 }): string {
  const t = text.trim();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      const before = hits.n;
      const red = JSON.stringify(redactJson(JSON.parse(t), hits), null, 2) + '\n';
      return hits.n === before ? text : red;
    } catch {
      /* JSON lines, or not JSON */
    }
  }
  return text
    .split('\n')
    .map((line) => {
      const l = line.trim();
      if (l.startsWith('{') && l.endsWith('}')) {
        try {
          const before = hits.n;
          const red = JSON.stringify(redactJson(JSON.parse(l), hits));
          return hits.n === before ? line : red;
        } catch {
          /* text */
        }
      }
      return redactText(line, hits);
    })
    .join('\n');
}
