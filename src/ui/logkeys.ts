// The keys of the Log and Dumps panels: scrolling the Log back through the file (anchored on a line),
// `/` search with n/N, esc, ←/→ for long lines, and `o` (the pager). What they read comes from the
// LogSource handed in (src/trainer/run/logback.ts, through the Host); the pager is the command's
// (src/commands/pager.ts: it owns the terminal). Nothing here touches a file.
import type { RefObject } from 'react';
import type { CockpitState } from '../cockpit/state.js';
import type { LogPage } from '../trainer/run/logback.js';
import type { PanelId } from './layout.js';
import { dumpsBody } from './panels/lists.js';
import { lineIndex, logWindow } from './panels/log.js';
import { matches, type Search, type TextPanel } from './search.js';
import { plain } from './text.js';
import type { ViewState } from './view.js';

/** The Log's scroll-back reader (LogBack). */
export interface LogSource {
  get(): LogPage;
  open(path: string, want: number): Promise<void>;
  older(n: number): Promise<void>;
  refresh(): Promise<void>;
  reset(): void;
  subscribe(fn: () => void): () => void;
}

/** Opens a file in the operator's pager with the cockpit suspended; resolves to why not, or null. */
export type PagerFn = (target: { path: string; what: string }) => Promise<string | null>;

/** Lines the scroll-back reads ahead of the view, so scrolling up rarely waits. */
const AHEAD = 2000;

export interface LogKeysCtx {
  view: { ref: RefObject<ViewState>; set(fn: (v: ViewState) => ViewState): void };
  stateRef: RefObject<CockpitState | null>;
  /** the inner size of a panel on screen now (null: not on screen) */
  size(p: PanelId): { w: number; h: number } | null;
  source?: LogSource;
  /** the log's path on its host */
  logPath(): string | null;
  pager?: PagerFn;
  refuse(what: string, why: string): void;
  /** draw everything again (after the pager gave the terminal back) */
  redraw(): void;
}

export const isTextPanel = (p: PanelId): p is TextPanel => p === 'log' || p === 'dumps';

export function logKeys(c: LogKeysCtx) {
  const v = () => c.view.ref.current!;
  const h = () => c.size('log')?.h ?? 10;
  /** scroll moves waiting for the scroll-back's first read */
  let pending = 0;

  const page = (): LogPage | null => c.source?.get() ?? null;
  const setAnchor = (at: number | null) =>
    c.view.set((x) => ({ ...x, logAnchor: at, logPage: at === null ? null : page() }));

  /** back to live: the scroll-back is dropped (its memory too) */
  const live = () => {
    pending = 0;
    c.view.set((x) => ({ ...x, logAnchor: null, logPage: null }));
    c.source?.reset();
  };

  /** move the anchored view by `delta` lines (negative: older) */
  const moveBy = (delta: number) => {
    const p = page();
    const a = v().logAnchor;
    if (!p || a == null || p.lines.length === 0) return;
    const top = Math.max(0, Math.min(lineIndex(p.lines, a), p.lines.length - h()));
    const to = top + delta;
    const last = p.lines.length - h();
    if (to >= last && p.after === 0 && delta > 0) return live();
    const i = Math.max(0, Math.min(to, Math.max(0, last)));
    setAnchor(p.lines[i]!.at);
    // read further back before the view gets there
    if (i < AHEAD / 4 && !p.atStart && !p.capped && !p.loading) void c.source!.older(AHEAD);
  };

  /** open the scroll-back (the first move away from live), then make the moves that waited for it */
  const openBack = (then: () => void) => {
    const path = c.logPath();
    if (!c.source || !path) {
      pending = 0;
      return c.refuse(
        'log scroll-back',
        path ? 'this cockpit cannot read the log back' : 'there is no train.log to read',
      );
    }
    c.view.set((x) => ({ ...x, logAnchor: x.logAnchor ?? -1 }));
    c.source.open(path, AHEAD + h()).then(
      () => {
        const p = page();
        if (!p || p.lines.length === 0) return live();
        then();
      },
      (e: Error) => {
        live();
        c.refuse('log scroll-back', e.message);
      },
    );
  };

  const scroll = (delta: number) => {
    if (v().logAnchor != null && v().logAnchor! >= 0) return moveBy(delta);
    if (delta >= 0) return;
    const first = pending === 0;
    pending += delta;
    if (!first) return;
    openBack(() => {
      const p = page()!;
      const d = pending;
      pending = 0;
      // from the live end: the bottom line of the view is the file's last line
      setAnchor(p.lines[Math.max(0, p.lines.length - h())]!.at);
      moveBy(d);
    });
  };

  const toStart = () => {
    const go = () => {
      const p = page();
      if (!p || p.lines.length === 0) return;
      setAnchor(p.lines[0]!.at);
      // as far back as the cap allows; the pager (o) has the rest
      if (!p.atStart && !p.capped)
        void c.source!.older(Number.MAX_SAFE_INTEGER).then(() => {
          const q = page();
          if (q?.lines.length && v().logAnchor != null) setAnchor(q.lines[0]!.at);
        });
    };
    if (v().logAnchor != null && v().logAnchor! >= 0) go();
    else if (pending === 0) {
      pending = -1;
      openBack(() => {
        pending = 0;
        go();
      });
    }
  };

  // ---- search ----
  const setSearch = (s: Search | null) => c.view.set((x) => ({ ...x, search: s }));

  /** Log: the next match older (dir -1) or newer (+1) than the current one, reading back for it */
  /** the Log's match at index i, a third down the view */
  const showLog = (p: LogPage, s: Search, i: number, said: string) => {
    const top = Math.max(0, Math.min(i - Math.floor(h() / 3), p.lines.length - h()));
    c.view.set((x) => ({ ...x, logAnchor: p.lines[top]!.at, logPage: p, search: { ...s, at: p.lines[i]!.at, said } }));
  };

  const findLog = (s: Search, dir: 1 | -1, retried = false) => {
    const p = page();
    if (!p || p.lines.length === 0 || v().logAnchor == null || v().logAnchor! < 0) {
      // live: the search runs over the scroll-back, opened first
      if (pending === 0) {
        pending = -1;
        openBack(() => {
          pending = 0;
          const q = page()!;
          setAnchor(q.lines[Math.max(0, q.lines.length - h())]!.at);
          findLog(s, dir);
        });
      }
      return;
    }
    const win = logWindow(c.stateRef.current!, v(), h());
    const from = s.at != null ? lineIndex(p.lines, s.at) : dir < 0 ? (win.top ?? 0) + win.shown.length : -1;
    let i = from + dir;
    while (i >= 0 && i < p.lines.length && !matches(p.lines[i]!.text, s.query)) i += dir;
    if (i >= 0 && i < p.lines.length) {
      const top = Math.max(0, Math.min(i - Math.floor(h() / 2), p.lines.length - h()));
      c.view.set((x) => ({
        ...x,
        logAnchor: p.lines[top]!.at,
        logPage: p,
        search: { ...s, at: p.lines[i]!.at, said: '' },
      }));
      return;
    }
    if (dir < 0 && !p.atStart && !p.capped && !retried) {
      setSearch({ ...s, said: 'reading back…' });
      void c.source!.older(AHEAD * 5).then(() => findLog(s, dir, true));
      return;
    }
    // none that way: from the other end of the scroll-back (wrapped), as less does
    let j = dir < 0 ? p.lines.length - 1 : 0;
    while (j >= 0 && j < p.lines.length && !matches(p.lines[j]!.text, s.query)) j += dir;
    if (j >= 0 && j < p.lines.length) return showLog(p, s, j, dir < 0 ? 'wrapped to the end' : 'wrapped to the start');
    setSearch({ ...s, said: 'no match in the scroll-back' + (p.atStart ? '' : ' (o: pager)') });
  };

  /** Dumps: the next match below (dir +1) or above (-1) the current one */
  const findDumps = (s: Search, dir: 1 | -1) => {
    const st = c.stateRef.current;
    const size = c.size('dumps');
    if (!st || !size) return;
    const d = dumpsBody(st, size.w, Date.now());
    const texts = d?.body.map(plain) ?? [];
    const from = s.at ?? (dir > 0 ? (v().scroll.dumps ?? 0) - 1 : texts.length);
    let i = from + dir;
    while (i >= 0 && i < texts.length && !matches(texts[i]!, s.query)) i += dir;
    if (i < 0 || i >= texts.length) return setSearch({ ...s, said: dir > 0 ? 'no match below' : 'no match above' });
    c.view.set((x) => ({
      ...x,
      scroll: { ...x.scroll, dumps: Math.max(0, i - Math.floor(size.h / 3)) },
      search: { ...s, at: i, said: '' },
    }));
  };

  const find = (dir: 1 | -1) => {
    const s = v().search;
    if (!s || s.typing || !s.query)
      return c.refuse('search', 'n and N move between the matches of a search: / first, in the Log or Dumps panel');
    if (s.panel === 'log') findLog(s, dir === 1 ? -1 : 1);
    else findDumps(s, dir);
  };

  return {
    /** ↑/↓/pgup/pgdn on the Log: lines from the live end (negative: older) */
    scroll,
    top: toStart,
    bottom: live,
    /** each new snapshot: a scrolled-back view counts the lines written since (how far behind live) */
    onSnapshot: () => {
      const a = v().logAnchor;
      if (a != null && a >= 0) void c.source?.refresh();
    },
    /** the scroll-back read something: the view takes the new page */
    onPage: () => {
      if (v().logAnchor != null) c.view.set((x) => ({ ...x, logPage: page() }));
    },
    /** `/` in the Log or Dumps panel */
    startSearch: (panel: PanelId) => {
      if (!isTextPanel(panel))
        return c.refuse('search', '/ searches the Log or the Dumps panel: tab to one of them first');
      setSearch({ panel, query: '', typing: true, at: null });
    },
    /** a key while the query is typed: true when it was taken */
    typing: (
      input: string,
      key: {
        return?: boolean;
        escape?: boolean;
        backspace?: boolean;
        delete?: boolean;
        ctrl?: boolean;
        meta?: boolean;
      },
    ): boolean => {
      const s = v().search;
      if (!s?.typing) return false;
      if (key.escape) setSearch(null);
      else if (key.backspace || key.delete) setSearch({ ...s, query: s.query.slice(0, -1) });
      else if (key.ctrl || key.meta) return true;
      else {
        const text = input.replace(/[\x00-\x1f\x7f]/g, '');
        const q = (s.query + text).slice(0, 200);
        if (/[\r\n]/.test(input) || key.return) {
          const done: Search = { ...s, query: q, typing: false, at: null };
          setSearch(q ? done : null);
          if (q && done.panel === 'log') findLog(done, -1);
          else if (q) findDumps(done, 1);
        } else setSearch({ ...s, query: q });
      }
      return true;
    },
    next: () => find(1),
    prev: () => find(-1),
    /** esc: the search goes; true when there was one */
    clear: (): boolean => {
      if (!v().search) return false;
      setSearch(null);
      return true;
    },
    /** ←/→ on the Log or Dumps */
    side: (delta: number) => {
      const f = v().focus;
      if (!isTextPanel(f)) return;
      c.view.set((x) => ({ ...x, hscroll: { ...x.hscroll, [f]: Math.max(0, (x.hscroll?.[f] ?? 0) + delta) } }));
    },
    /** `o`: the focused log or dump in $PAGER */
    open: () => {
      const f = v().focus;
      const st = c.stateRef.current;
      if (!c.pager) return c.refuse('pager', 'no terminal to open a pager on');
      let target: { path: string; what: string } | null = null;
      if (f === 'log') {
        const path = c.logPath();
        if (!path) return c.refuse('pager', 'there is no train.log to open');
        target = { path, what: 'log' };
      } else if (f === 'dumps') {
        const size = c.size('dumps');
        const d = st && size ? dumpsBody(st, size.w, Date.now()) : null;
        const path = d?.files[0];
        if (!path) return c.refuse('pager', 'no stack dump to open yet');
        target = { path, what: 'dump' };
      } else return c.refuse('pager', 'o opens the Log or a dump in $PAGER: tab to the Log or Dumps panel first');
      c.pager(target).then(
        (why) => {
          c.redraw();
          if (why) c.refuse('pager', why);
        },
        (e: Error) => {
          c.redraw();
          c.refuse('pager', e.message);
        },
      );
    },
  };
}

export type LogKeys = ReturnType<typeof logKeys>;

/** The log file's path: the snapshot names it relative to the run dir, or absolute (a launcher dir). */
export function logPath(runDir: string, file: string | null): string | null {
  if (!file) return null;
  return file.startsWith('/') ? file : `${runDir.replace(/\/+$/, '')}/${file}`;
}
