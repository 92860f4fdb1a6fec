// A small semantic palette. Panels name a role; only this file knows colours. NO_COLOR (any
// non-empty value, https://no-color.org) drops colours but keeps bold/inverse.

export type Role = 'ok' | 'warn' | 'crit' | 'info' | 'dim' | 'accent' | 'title' | 'focus' | 'bar' | 'muted';

const COLORS: Record<Role, string | undefined> = {
  ok: 'green',
  warn: 'yellow',
  crit: 'red',
  info: 'cyan',
  dim: 'gray',
  accent: 'magenta',
  title: 'white',
  focus: 'cyan',
  bar: 'blue',
  muted: undefined,
};

export function noColor(env: NodeJS.ProcessEnv = process.env): boolean {
  return typeof env.NO_COLOR === 'string' && env.NO_COLOR !== '';
}

export function colorOf(role: Role | undefined, disabled: boolean): string | undefined {
  if (!role || disabled) return undefined;
  return COLORS[role];
}

/** Roles that must stay distinguishable without colour get bold. */
export function boldOf(role: Role | undefined): boolean {
  return role === 'crit' || role === 'title';
}
