// A seeded pseudo-random source for tests that compare a cache against the code it replaced over
// many generated inputs: the same seed gives the same inputs, so a failure names a reproducible case.
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}
