// A command's command line, declared once: its options and its positional word give both the
// parser (Node's util.parseArgs, strict) and the command's --help text. The rules are the same for
// every command: `--x=v` and `--x v` are one thing; a value that starts with '-' is written
// `--x=-v`; `--` ends the options; an unknown option, a missing value or a value out of range is a
// one-line CliError (exit 2) that names the option. Every command also takes --read-only (the CLI
// turns it into NSA_TOP_READ_ONLY=1 before the command loads) and -h/--help.
import { parseArgs } from 'node:util';
import { CliError } from './errors.js';
import { writeStdout } from '../stdout.js';

export interface OptionSpec {
  /** 'number': a string on the command line, converted and checked (min, max, integer) */
  readonly type: 'string' | 'boolean' | 'number';
  /** one line for --help (more lines: '\n') */
  readonly help: string;
  /** one letter: -i */
  readonly short?: string;
  /** the value's name in --help: --steps N (default: the option's name in capitals) */
  readonly value?: string;
  /** what the error for a missing value asks for (default: `a value (N)`) */
  readonly needs?: string;
  /** repeatable: every value, in order (otherwise the last one given wins) */
  readonly multiple?: boolean;
  readonly default?: string | number | boolean;
  readonly required?: boolean;
  readonly min?: number;
  readonly max?: number;
  readonly integer?: boolean;
  /** the only values a string option takes */
  readonly choices?: readonly string[];
}

export interface CommandSpec {
  /** the command word ('status'); '' for nsa-top itself (the cockpit) */
  readonly name: string;
  /** the one positional word the command takes, if any */
  readonly positional?: { readonly name: string; readonly help: string; readonly required?: boolean };
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** words after `--` are handed on as they are (`rest`), e.g. to a trainer */
  readonly passThrough?: { readonly name: string; readonly help: string };
  /** prose between the usage line and the options */
  readonly about?: string;
  /** prose after the options (exit codes, formats) */
  readonly epilog?: string;
}

/** the options every command takes */
export const GLOBAL_OPTIONS = {
  'read-only': {
    type: 'boolean',
    help: 'refuse every dump, halt, stop, relaunch and write (as NSA_TOP_READ_ONLY=1 does)',
  },
  help: { type: 'boolean', short: 'h', help: 'this help' },
} as const satisfies Record<string, OptionSpec>;

type One<O extends OptionSpec> = O['type'] extends 'number' ? number : string;
type ValueOf<O extends OptionSpec> = O['type'] extends 'boolean'
  ? boolean
  : O['multiple'] extends true
    ? One<O>[]
    : O extends { default: string | number } | { required: true }
      ? One<O>
      : One<O> | undefined;

export type Values<S extends CommandSpec> = { -readonly [K in keyof S['options']]: ValueOf<S['options'][K]> } & {
  'read-only': boolean;
};

export interface Parsed<S extends CommandSpec> {
  values: Values<S>;
  positional: S['positional'] extends { required: true } ? string : string | undefined;
  /** the words after `--` of a command with passThrough */
  rest: string[];
}

/** Declares a command (the identity, typed: the option types flow into `Values`). */
export function defineCommand<const S extends CommandSpec>(spec: S): S {
  return spec;
}

function allOptions(spec: CommandSpec): [string, OptionSpec][] {
  return [...Object.entries(spec.options), ...Object.entries(GLOBAL_OPTIONS)];
}

function fail(spec: CommandSpec, what: string): CliError {
  return new CliError(`${spec.name ? `${spec.name}: ` : ''}${what}`, 2);
}

const seeHelp = (spec: CommandSpec) => `(see nsa-top ${spec.name ? `${spec.name} ` : ''}--help)`;

const valueName = (name: string, o: OptionSpec) => o.value ?? o.choices?.join('|') ?? name.toUpperCase();

/** `--steps needs a value (N)`, `-i/--identity needs a key file` */
const needsValue = (name: string, o: OptionSpec) =>
  `${o.short ? `-${o.short}/` : ''}--${name} needs ${o.needs ?? `a value (${valueName(name, o)})`}`;

/** `--steps N`, `-i KEY`, `--json` */
function flagWithValue(name: string, o: OptionSpec, preferShort = false): string {
  const flag = preferShort && o.short ? `-${o.short}` : `--${name}`;
  return o.type === 'boolean' ? flag : `${flag} ${valueName(name, o)}`;
}

const orList = (xs: readonly string[]) =>
  xs.length < 2 ? xs.join('') : `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`;

function describeNumber(o: OptionSpec): string {
  const what = o.integer ? 'an integer' : 'a number';
  if (o.min !== undefined && o.max !== undefined) return `${what} between ${o.min} and ${o.max}`;
  if (o.min !== undefined) return `${what} >= ${o.min}`;
  if (o.max !== undefined) return `${what} <= ${o.max}`;
  return what;
}

function convert(spec: CommandSpec, name: string, o: OptionSpec, v: string): string | number {
  if (v === '') throw fail(spec, needsValue(name, o));
  if (o.choices && !o.choices.includes(v)) throw fail(spec, `--${name} takes ${orList(o.choices)}, got '${v}'`);
  if (o.type !== 'number') return v;
  const t = v.trim();
  const n = Number(t);
  const ok =
    t !== '' &&
    (o.integer ? /^[+-]?\d+$/.test(t) : Number.isFinite(n)) &&
    (o.min === undefined || n >= o.min) &&
    (o.max === undefined || n <= o.max);
  if (!ok) throw fail(spec, `--${name} needs ${describeNumber(o)}, got '${v}'`);
  return n;
}

/** util.parseArgs' error as one line that names the option as it was given */
function explain(spec: CommandSpec, e: Error & { code?: string }): CliError {
  const given = /'(-[^' ,]*)/.exec(e.message)?.[1];
  const entry = allOptions(spec).find(([n, o]) => given === `--${n}` || given === `-${o.short}`);
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || (given && !entry))
    return fail(spec, `unknown option ${given ?? '?'} ${seeHelp(spec)}`);
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && given && entry) {
    const [name, o] = entry;
    if (o.type === 'boolean') return fail(spec, `${given} takes no value`);
    const dash = /ambiguous/.test(e.message) ? `; one that starts with '-' is written --${name}=-…` : '';
    return fail(spec, `${needsValue(name, o)}${dash}`);
  }
  return fail(spec, e.message.split('\n')[0]!);
}

/**
 * Parses argv by the declaration. `-h`/`--help` prints the command's help and gives null (the
 * command returns 0); anything wrong throws a one-line CliError (exit 2).
 */
export function parseCommand<const S extends CommandSpec>(spec: S, argv: string[]): Parsed<S> | null {
  const options = Object.fromEntries(
    allOptions(spec).map(([name, o]) => [
      name,
      {
        type: o.type === 'boolean' ? ('boolean' as const) : ('string' as const),
        ...(o.short ? { short: o.short } : {}),
        ...(o.multiple ? { multiple: true } : {}),
      },
    ]),
  );
  let r;
  try {
    r = parseArgs({ args: argv, options, strict: true, allowPositionals: true, tokens: true });
  } catch (e) {
    throw explain(spec, e as Error & { code?: string });
  }
  if (r.values.help) {
    writeStdout(helpText(spec));
    return null;
  }
  const end = r.tokens.find((t) => t.kind === 'option-terminator')?.index ?? Infinity;
  const words: string[] = [];
  const rest: string[] = [];
  for (const t of r.tokens)
    if (t.kind === 'positional') (spec.passThrough && t.index > end ? rest : words).push(t.value);
  const p = spec.positional;
  if (words.length > 0 && !p)
    throw fail(
      spec,
      `unexpected argument '${words[0]}' ${spec.passThrough ? `(${spec.passThrough.name}: after --)` : seeHelp(spec)}`,
    );
  if (words.length > 1) throw fail(spec, `more than one ${p!.name} given: ${words.join(', ')}`);
  if (p?.required && words.length === 0) throw fail(spec, `${p.name} missing: ${p.help}`);
  const values: Record<string, unknown> = {};
  for (const [name, o] of allOptions(spec)) {
    const raw = r.values[name];
    if (o.type === 'boolean') {
      values[name] = raw ?? o.default ?? false;
      continue;
    }
    const given = (raw === undefined ? [] : Array.isArray(raw) ? raw : [raw]).map((v) =>
      convert(spec, name, o, String(v)),
    );
    if (o.multiple) values[name] = given;
    else if (given.length > 0) values[name] = given[0];
    else if (o.required)
      throw fail(spec, `${flagWithValue(name, o)} is required: ${o.help.split('\n')[0]} ${seeHelp(spec)}`);
    else values[name] = o.default;
  }
  return { values: values as Values<S>, positional: words[0] as Parsed<S>['positional'], rest };
}

const WIDTH = 100;

/** The command's --help: the usage line, the about text, every option with its help, the epilog. */
export function helpText(spec: CommandSpec): string {
  const head = `usage: nsa-top${spec.name ? ` ${spec.name}` : ''}`;
  const p = spec.positional;
  const words = [
    ...(p ? [p.required ? p.name : `[${p.name}]`] : []),
    ...allOptions(spec)
      .filter(([name]) => name !== 'help')
      .map(([name, o]) =>
        o.required ? flagWithValue(name, o, true) : `[${flagWithValue(name, o, true)}]${o.multiple ? '...' : ''}`,
      ),
    ...(spec.passThrough ? [`[-- ${spec.passThrough.name}...]`] : []),
  ];
  const usage: string[] = [head];
  for (const w of words) {
    const last = usage[usage.length - 1]!;
    if (last.length + 1 + w.length > WIDTH && last !== head) usage.push(`${' '.repeat(head.length)} ${w}`);
    else usage[usage.length - 1] = `${last} ${w}`;
  }
  const rows: [string, string][] = [
    ...(p ? [[p.name, p.help] as [string, string]] : []),
    ...allOptions(spec).map(([name, o]): [string, string] => [
      `${o.short ? `-${o.short}, ` : ''}${flagWithValue(name, o)}`,
      o.help,
    ]),
    ...(spec.passThrough ? [[`-- ${spec.passThrough.name}...`, spec.passThrough.help] as [string, string]] : []),
  ];
  const w = Math.max(...rows.map(([l]) => l.length)) + 2;
  const list = rows.map(([l, h]) => `  ${l.padEnd(w)}${h.split('\n').join(`\n  ${' '.repeat(w)}`)}`);
  const parts = [usage.join('\n'), ...(spec.about ? [spec.about.trimEnd()] : []), list.join('\n')];
  if (spec.epilog) parts.push(spec.epilog.trimEnd());
  return `${parts.join('\n\n')}\n`;
}
