declare module 'asciichart' {
  export interface PlotConfig {
    height?: number;
    offset?: number;
    padding?: string;
    format?: (x: number, i: number) => string;
    min?: number;
    max?: number;
    symbols?: string[];
    colors?: string[];
  }
  export function plot(series: number[] | number[][], cfg?: PlotConfig): string;
  const asciichart: { plot: typeof plot };
  export default asciichart;
}
