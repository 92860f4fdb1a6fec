// Placeholder until its issue lands; replaced by the owning module.
import { CliError } from './errors.js';

export async function run(_argv: string[]): Promise<number> {
  throw new CliError('launch: not implemented yet');
}
