// The read side of a multi-node launch's record (<run>/.nsa-top/nodes.json) and each node's
// supervisor as read there. It lives in run/, not launch/: the one observation reads it every round,
// and importing it from launch/ pulled the profiles' parsers (zod, yaml) into every `status`.
import { join } from 'node:path';
import type { Host } from '../../remote/host.js';
import type { SupervisorState } from '../control/types.js';
import { readSupervisorState } from './launchstate.js';
import { readOwnPointer } from './pointers.js';

/** <run>/.nsa-top/nodes.json: which node runs which node_rank, and where its launcher dir is */
export const NODES_FILE = 'nodes.json' as const;

export interface NodesRecord {
  version: 1;
  runDir: string;
  profile: string;
  outDir: string;
  rdzvId: string;
  started: string;
  nodes: { label: string; nodeRank: number; dir: string }[];
}

/** node_rank R's launcher dir (on that node) */
export function nodeDirOf(runDir: string, nodeRank: number): string {
  return join(runDir, 'nodes', String(nodeRank));
}

/** nodes.json of a launch dir, when nsa-top wrote it for this very dir; null otherwise. */
export async function readNodesRecord(host: Host, runDir: string): Promise<NodesRecord | null> {
  const r = await readOwnPointer(host, runDir, NODES_FILE, 'runDir').catch(() => null);
  const j = r?.json as NodesRecord | null | undefined;
  return j && j.version === 1 && Array.isArray(j.nodes) ? j : null;
}

export interface NodeSupervisor {
  label: string;
  nodeRank: number;
  dir: string;
  /** null: no state (yet), or its node cannot be read (error) */
  state: SupervisorState | null;
  error: string | null;
}

/**
 * Each node's supervisor of a multi-node launch, read on its own node (its pid + start time checked
 * there: pids are per node). `hostOf` gives the node's Host, or why it cannot be reached.
 */
export async function readNodeSupervisors(
  primary: Host,
  runDir: string,
  hostOf: (label: string) => Host | string,
): Promise<NodeSupervisor[] | null> {
  const rec = await readNodesRecord(primary, runDir);
  if (!rec) return null;
  return Promise.all(
    rec.nodes.map(async (n): Promise<NodeSupervisor> => {
      const h = hostOf(n.label);
      if (typeof h === 'string') return { ...n, state: null, error: h };
      try {
        return { ...n, state: await readSupervisorState(h, n.dir), error: null };
      } catch (e) {
        return { ...n, state: null, error: (e as Error).message.split('\n')[0]! };
      }
    }),
  );
}
