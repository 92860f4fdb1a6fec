import type { Host } from './host.js';

/**
 * A small text file (a config) through a host, at most `maxBytes` of it; or the error that names
 * it (`PATH: not found`, `PATH: <message>`).
 */
export async function readTextFile(
  host: Host,
  path: string,
  maxBytes = 1 << 20,
): Promise<{ text: string; error?: undefined } | { text?: undefined; error: string }> {
  try {
    return { text: (await host.readFile(path, maxBytes)).toString('utf8') };
  } catch (e) {
    return {
      error: `${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : (e as Error).message}`,
    };
  }
}
