// Run on node A by test/multinode/launch.test.ts (node --import tsx): each node's supervisor of a
// multi-node launch as `status --node` shows them (src/commands/launch-nodes.ts nodeSupervisorsAt),
// read over each node's own connection. Prints one JSON object: { supervisors, text }.
// Arguments: RUN_DIR -i KEY NODE…
import { LocalHost } from '../../src/remote/local/host.js';
import { formatNodeSupervisors, nodeSupervisorsAt, nodeSupervisorsJson } from '../../src/commands/launch-nodes.js';
import { openNodes } from '../../src/commands/nodes.js';

const [runDir, dashI, key, ...names] = process.argv.slice(2);
if (!runDir || dashI !== '-i' || !key || names.length === 0) throw new Error('usage: RUN_DIR -i KEY NODE…');
const nodes = await openNodes(names, { identity: key, acceptNewHostKey: false });
try {
  const sups = await nodeSupervisorsAt(nodes.primary.host ?? new LocalHost(), runDir, nodes);
  process.stdout.write(
    `${JSON.stringify({ supervisors: sups ? nodeSupervisorsJson(sups) : null, text: sups ? formatNodeSupervisors(sups) : '' })}\n`,
  );
} finally {
  await nodes.set.close();
}
