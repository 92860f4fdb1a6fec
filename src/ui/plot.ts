// The line plot of the charts: asciichart's `plot` (v1.5, the rows it prints, character for
// character: test/ui/plot.test.ts holds the two side by side), drawn into one row of UTF-16 code
// units per plot row and made a string natively. asciichart builds a grid of one-character strings,
// joins each row and the rows, and the chart split them again: on a live run both charts change
// every second, and that grid was the largest part of a cockpit frame. Only what the charts use is
// kept: the labels' format, the offset, explicit min and max, one or more series of finite values.

const CORNER = 0x253c; // ┼ the axis where the scale crosses 0, and each series' first value
const AXIS = 0x2524; // ┤
const FLAT = 0x2500; // ─
const DOWN_TO = 0x2570; // ╰ (the lower end of a fall)
const UP_TO = 0x256d; // ╭ (the upper end of a rise)
const DOWN_FROM = 0x256e; // ╮
const UP_FROM = 0x256f; // ╯
const VERTICAL = 0x2502; // │
const BLANK = 0x20;

export interface PlotOptions {
  /** plot rows − 1 (asciichart's height) */
  height: number;
  min: number;
  max: number;
  /** the label of a row's value (its row index second): at least one character */
  format: (x: number, i: number) => string;
  /** columns before the first value: the label's and the axis' */
  offset: number;
}

/** The plot's rows, top first, as asciichart.plot(series, o).split('\n') gives them. */
export function plotRows(series: readonly (readonly number[])[], o: PlotOptions): string[] {
  let min = o.min;
  let max = o.max;
  let len = 0;
  for (const s of series) {
    for (let i = 0; i < s.length; i++) {
      min = Math.min(min, s[i]!);
      max = Math.max(max, s[i]!);
    }
    len = Math.max(len, s.length);
  }
  const range = Math.abs(max - min);
  const ratio = range !== 0 ? o.height / range : 1;
  const min2 = Math.round(min * ratio);
  const max2 = Math.round(max * ratio);
  const rows = Math.abs(max2 - min2);
  const offset = o.offset;
  // the plot's columns (from `offset` on) as code units, one array per row; the columns before it
  // (the label, then the axis) as strings, as asciichart puts them in its cells
  const width = len;
  const cells = new Uint16Array((rows + 1) * width).fill(BLANK);
  // each row's label and the axis' symbol after it (asciichart's first `offset` cells)
  const labels: string[] = [];
  const axis: number[] = [];
  for (let y = min2; y <= max2; ++y) {
    labels.push(o.format(rows > 0 ? max - ((y - min2) * range) / rows : y, y - min2));
    axis.push(y === 0 ? CORNER : AXIS);
  }
  const put = (row: number, x: number, c: number) => {
    cells[row * width + x] = c;
  };
  for (const s of series) {
    if (s.length === 0) continue;
    const first = Math.round(s[0]! * ratio) - min2;
    axis[rows - first] = CORNER;
    for (let x = 0; x < s.length - 1; x++) {
      const y0 = Math.round(s[x]! * ratio) - min2;
      const y1 = Math.round(s[x + 1]! * ratio) - min2;
      if (y0 === y1) put(rows - y0, x, FLAT);
      else {
        put(rows - y1, x, y0 > y1 ? DOWN_TO : UP_TO);
        put(rows - y0, x, y0 > y1 ? DOWN_FROM : UP_FROM);
        const from = Math.min(y0, y1);
        const to = Math.max(y0, y1);
        for (let y = from + 1; y < to; y++) put(rows - y, x, VERTICAL);
      }
    }
  }
  const out: string[] = [];
  for (let i = 0; i <= rows; i++) {
    // the label in cell max(offset − its length, 0), blanks in the others, the axis in the last
    const label = labels[i]!;
    const at = Math.max(offset - label.length, 0);
    const lead = at < offset - 1 ? ' '.repeat(at) + label + ' '.repeat(offset - 2 - at) : ' '.repeat(offset - 1);
    const row = cells.subarray(i * width, (i + 1) * width);
    out.push(lead + String.fromCharCode(axis[i]!) + String.fromCharCode.apply(null, row as never));
  }
  return out;
}
