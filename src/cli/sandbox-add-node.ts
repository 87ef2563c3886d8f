/**
 * `covenant sandbox add-node`: joins one more node to a running sandbox. The node's configuration
 * is the sandbox's (node 0's, with its own folder and fresh ports) in Join mode against a node
 * that answers; it runs detached from this command, member 0 of network.json trusts it by
 * proposal and ballot (an open service keeps a joiner Pending until members trust it), and it is
 * recorded in network.json, where the running sandbox finds it when it stops its nodes.
 */
import { X509Certificate } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorMessage } from '../base/errors.js';
import { nodeIdFromPublicKey } from '../crypto/index.js';
import { ACCEPT_BALLOT, propose, resolveConnection, vote } from './member.js';
import { writeFileAtomic } from './node-command.js';
import { getJson, nodeRestartCommand, processCommandLine, sleep, type NetworkJson, type NetworkNode } from './sandbox-nodes.js';

const CLI_ENTRY = fileURLToPath(new URL('./main.js', import.meta.url));

export interface AddNodeOptions {
  readonly network: string;
  readonly readyTimeoutSeconds: number;
  readonly print: (line: string) => void;
}

/** A node of the network that answers GET /node/state, or an error naming every one tried. */
async function answeringNode(network: NetworkJson, caPem: string): Promise<NetworkNode> {
  const tried: string[] = [];
  for (const node of network.nodes) {
    try {
      const answer = await getJson(node.rpc_address, '/node/state', caPem);
      if (answer.status === 200) return node;
      tried.push(`${node.rpc_address} answered ${answer.status}`);
    } catch (e) {
      tried.push(`${node.rpc_address}: ${errorMessage(e)}`);
    }
  }
  throw new Error(`no node of the sandbox answers (${tried.join('; ')}): is it running?`);
}

/** The next free node folder of the sandbox: node<N>. */
function nextNodeIndex(dir: string, network: NetworkJson): number {
  let i = network.nodes.length;
  while (existsSync(join(dir, `node${i}`))) i++;
  return i;
}

/** Node 0's configuration made into a joiner's in `nodeDir`: Join, its own files, fresh ports, no sealing location. */
function joinerConfig(template: Record<string, any>, nodeDir: string, serviceCert: string, target: string): Record<string, any> {
  const config = structuredClone(template);
  config.command = { type: 'Join', service_certificate_file: serviceCert, join: { target_rpc_address: target, retry_timeout: '200ms' } };
  config.node_certificate_file = join(nodeDir, 'node_cert.pem');
  config.ledger = { ...(config.ledger ?? {}), directory: join(nodeDir, 'ledger') };
  delete config.ledger.read_only_directories;
  config.snapshots = { ...(config.snapshots ?? {}), directory: join(nodeDir, 'snapshots') };
  delete config.snapshots.read_only_directory;
  config.output_files = { ...(config.output_files ?? {}), rpc_addresses_file: join(nodeDir, 'rpc_addresses.json') };
  for (const rpc of Object.values((config.rpc_interfaces ?? {}) as Record<string, { bind_address?: string; published_address?: string }>)) {
    rpc.bind_address = '127.0.0.1:0';
    delete rpc.published_address;
  }
  config.node_to_node_interface = { ...(config.node_to_node_interface ?? {}), bind_address: '127.0.0.1:0' };
  delete config.node_to_node_interface.published_address;
  // A sealing location is one of a fixed, configured set: a node added later is not one.
  delete config.sealing_recovery;
  return config;
}

export async function runSandboxAddNode(options: AddNodeOptions): Promise<void> {
  const networkFile = resolve(options.network);
  if (!existsSync(networkFile)) throw new Error(`${networkFile}: no such file (the network.json of a running sandbox)`);
  const network = JSON.parse(readFileSync(networkFile, 'utf8')) as NetworkJson;
  const dir = dirname(networkFile);
  const caPem = readFileSync(network.service_certificate, 'utf8');
  const target = await answeringNode(network, caPem);
  const i = nextNodeIndex(dir, network);
  const nodeDir = join(dir, `node${i}`);
  mkdirSync(nodeDir, { recursive: true });
  const template = JSON.parse(readFileSync(network.nodes[0]!.config, 'utf8')) as Record<string, any>;
  const configPath = join(nodeDir, 'node.json');
  writeFileAtomic(configPath, JSON.stringify(joinerConfig(template, nodeDir, network.service_certificate, target.rpc_address), null, 2) + '\n');
  const out = openSync(join(nodeDir, 'out.log'), 'a');
  // Detached: it outlives this command; the sandbox (or kill <pid>) stops it.
  const child = spawn(process.execPath, ['--enable-source-maps', CLI_ENTRY, 'node', '--config', configPath], { stdio: ['ignore', out, out], cwd: nodeDir, detached: true });
  child.unref();
  const pid = child.pid ?? -1;
  options.print(`Started node ${i} (pid ${pid}), joining ${target.rpc_address}; log ${join(nodeDir, 'out.log')}`);
  try {
    const entry = await trustAndWait(options, network, networkFile, { nodeDir, configPath, pid });
    network.nodes.push(entry);
    writeFileAtomic(networkFile, JSON.stringify(network, null, 2) + '\n');
    options.print(`Node ${i} (${entry.node_id.slice(0, 12)}…) is part of the network at https://${entry.rpc_address}; recorded in ${networkFile}`);
    if (network.sandbox_pid === undefined || processCommandLine(network.sandbox_pid) === undefined) {
      options.print(`No sandbox process runs for ${networkFile}: stop this node yourself (kill ${pid})`);
    }
  } catch (e) {
    if (processCommandLine(pid)?.includes(configPath)) process.kill(pid, 'SIGTERM');
    throw new Error(`${errorMessage(e)}; the end of ${join(nodeDir, 'out.log')}:\n${logTail(join(nodeDir, 'out.log'))}`);
  }
}

function logTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').slice(-5).map((l) => `  ${l}`).join('\n');
  } catch (e) {
    return `  (cannot read it: ${errorMessage(e)})`;
  }
}

/** Trusts the joiner once it is Pending (member 0 proposes and votes), and waits until it is PartOfNetwork. */
async function trustAndWait(options: AddNodeOptions, network: NetworkJson, networkFile: string, node: { nodeDir: string; configPath: string; pid: number }): Promise<NetworkNode> {
  const member = resolveConnection({ network: networkFile, member: 0 });
  const caPem = member.caPem;
  const deadline = Date.now() + options.readyTimeoutSeconds * 1000;
  let trusted = false;
  for (;;) {
    if (processCommandLine(node.pid) === undefined) throw new Error(`the node (pid ${node.pid}) exited`);
    if (Date.now() > deadline) throw new Error(`the node did not become part of the network within ${options.readyTimeoutSeconds}s`);
    const nodeId = nodeIdOf(join(node.nodeDir, 'node_cert.pem'));
    const addressesFile = join(node.nodeDir, 'rpc_addresses.json');
    if (nodeId !== undefined && existsSync(addressesFile)) {
      const address = Object.values(JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>)[0]!;
      if (!trusted) {
        const record = await getJson(member.address, `/node/network/nodes/${nodeId}`, caPem).catch(() => undefined);
        if ((record?.body as { status?: string } | undefined)?.status === 'Pending') {
          const proposal = await propose(member, [{ name: 'transition_node_to_trusted', args: { node_id: nodeId } }]);
          const id = (proposal.body as { proposal_id: string }).proposal_id;
          if ((proposal.body as { state: string }).state === 'Open') await vote(member, id, ACCEPT_BALLOT);
          options.print(`  member 0 trusted node ${nodeId.slice(0, 12)}… (proposal ${id})`);
          trusted = true;
        }
      }
      // Not endorsed by the service until it joined: the service certificate does not verify it before.
      const state = await getJson(address, '/node/state', caPem).catch(() => undefined);
      if (state?.status === 200 && (state.body as { state?: string }).state === 'PartOfNetwork') {
        return {
          node_id: nodeId,
          rpc_address: address,
          pid: node.pid,
          node_certificate: join(node.nodeDir, 'node_cert.pem'),
          ledger_dir: join(node.nodeDir, 'ledger'),
          snapshots_dir: join(node.nodeDir, 'snapshots'),
          config: node.configPath,
          restart_command: nodeRestartCommand(node.configPath),
        };
      }
    }
    await sleep(200);
  }
}

/** The node id of the certificate in `file`, once the node wrote it. */
function nodeIdOf(file: string): string | undefined {
  try {
    return nodeIdFromPublicKey(new X509Certificate(readFileSync(file)).publicKey);
  } catch {
    return undefined; // not written yet (or being written)
  }
}
