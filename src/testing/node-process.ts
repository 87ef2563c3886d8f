/**
 * Runs real node processes for end-to-end tests and benchmarks: a temp folder per node, a
 * configuration written like an operator would, the compiled `covenant node` in its own OS
 * process, discovery of the bound port through output_files, and a clean stop (or SIGKILL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { X509Certificate } from 'node:crypto';
import { parseTxId } from '../base/ids.js';
import { ACCEPT_BALLOT, openService, propose, vote, type MemberConnection } from '../cli/member.js';
import { generateIdentity, nodeIdFromPublicKey, type Identity } from '../crypto/index.js';
import { HttpsClient, type ClientIdentity, type HttpAnswer, type RequestOptions } from '../platform/https-client.js';

/**
 * The `covenant` command the nodes run: this build's, or the one COVENANT_NODE_CLI names (a
 * benchmark comparing two builds runs the same load against another build's nodes).
 */
export const CLI_ENTRY = process.env['COVENANT_NODE_CLI'] ?? fileURLToPath(new URL('../cli/main.js', import.meta.url));

export interface StartedNode {
  readonly dir: string;
  readonly configPath: string;
  readonly address: string;
  readonly serviceCertificatePem: string;
  readonly process: ChildProcess;
  readonly client: HttpsClient;
  readonly user: ClientIdentity & { id: string };
  readonly member: ClientIdentity & { id: string };
  output(): string;
  stop(): Promise<number | null>;
  kill(): Promise<void>;
}

export interface StartNodeOptions {
  /** Deep-merged over the generated configuration (objects merge, other values replace). */
  readonly configPatch?: Record<string, unknown>;
  readonly dir?: string;
  readonly readyTimeoutMs?: number;
  /** Extra environment of the node process (e.g. COVENANT_FRAMING). */
  readonly env?: Record<string, string>;
  /**
   * Whether member0 opens the service to users once the node is up (default true), as the
   * sandbox does: the application answers only then. A test that joins nodes while the service
   * is still opening (trusted at once) passes false and calls openTestService afterwards.
   */
  readonly open?: boolean;
}

function merge(base: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(patch)) {
    const b = out[k];
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && b && typeof b === 'object' && !Array.isArray(b)
        ? merge(b as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function asClient(identity: Identity): ClientIdentity & { id: string } {
  return { certificatePem: identity.certificatePem, privateKeyPem: identity.privateKeyPem, id: identity.id };
}

/**
 * Writes `dir/node.json` the way an operator would for a test node: loopback interfaces on port 0
 * (the bound addresses come back through output_files), relative ledger and snapshot folders.
 */
function writeNodeConfig(dir: string, command: Record<string, unknown>, patch: Record<string, unknown> = {}): string {
  const config = merge(
    {
      command,
      node_certificate: { subject_alt_names: ['iPAddress:127.0.0.1'] },
      node_certificate_file: 'node_cert.pem',
      rpc_interfaces: {
        primary: { bind_address: '127.0.0.1:0', enabled_operator_features: ['LedgerChunkRead', 'SnapshotRead', 'SnapshotCreate'] },
      },
      node_to_node_interface: { bind_address: '127.0.0.1:0' },
      ledger: { directory: 'ledger' },
      snapshots: { directory: 'snapshots' },
      output_files: { rpc_addresses_file: 'rpc_addresses.json' },
    },
    patch,
  );
  const configPath = join(dir, 'node.json');
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  return configPath;
}

/** Writes identities and a Start configuration into a fresh folder; returns paths and identities. */
export async function prepareStartNode(options: StartNodeOptions = {}) {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'covenant-node-'));
  mkdirSync(dir, { recursive: true });
  const [member, user] = await Promise.all([generateIdentity({ commonName: 'member0' }), generateIdentity({ commonName: 'user0' })]);
  writeFileSync(join(dir, 'member0_cert.pem'), member.certificatePem);
  writeFileSync(join(dir, 'user0_cert.pem'), user.certificatePem);
  const configPath = writeNodeConfig(
    dir,
    {
      type: 'Start',
      service_certificate_file: 'service_cert.pem',
      start: { members: [{ certificate_file: 'member0_cert.pem' }], users: [{ certificate_file: 'user0_cert.pem' }] },
    },
    options.configPatch,
  );
  return { dir, configPath, member: asClient(member), user: asClient(user) };
}

/** Runs `covenant node --config <path>` and returns the process and a way to read its output. */
export function spawnNode(configPath: string, cwd: string, env?: Record<string, string>): { process: ChildProcess; output: () => string } {
  let output = '';
  const child = spawn(process.execPath, ['--enable-source-maps', CLI_ENTRY, 'node', '--config', configPath], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(env ? { env: { ...process.env, ...env } } : {}),
  });
  // COVENANT_TEST_NODE_LOGS=<folder>: every node's output is also kept there as <pid>.log (for a
  // test that failed once: the nodes' side of what happened).
  const logs = process.env['COVENANT_TEST_NODE_LOGS'];
  const log = logs !== undefined && child.pid !== undefined ? join(logs, `${child.pid}.log`) : undefined;
  if (log !== undefined) mkdirSync(logs!, { recursive: true });
  const keep = (c: Buffer) => {
    output += c.toString();
    if (log !== undefined) appendFileSync(log, c);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { process: child, output: () => output };
}

export function waitForExit(child: ChildProcess): Promise<number | null> {
  // 'close' comes after the output streams end: callers read the whole output afterwards.
  // A stream destroyed (not ended) has closed too: no 'close' is to come.
  const done = (stream: NodeJS.ReadableStream & { readableEnded?: boolean; destroyed?: boolean } | null) => stream === null || stream.readableEnded === true || stream.destroyed === true;
  const streamsDone = done(child.stdout) && done(child.stderr);
  if ((child.exitCode !== null || child.signalCode !== null) && streamsDone) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('close', (code) => resolve(code)));
}

/**
 * A test node's client: a request that fails in transport (reset, refused, hung up) says what the
 * node process was doing then — running or exited, and the end of its output — so a test that
 * fails once shows the node's side of it.
 */
class NodeClient extends HttpsClient {
  constructor(
    address: string,
    caPem: string,
    private readonly child: ChildProcess,
    private readonly output: () => string,
  ) {
    super(address, caPem);
  }

  override async request(method: string, path: string, options?: RequestOptions): Promise<HttpAnswer> {
    try {
      return await super.request(method, path, options);
    } catch (e) {
      if (e instanceof Error && typeof (e as NodeJS.ErrnoException).code === 'string') {
        const { exitCode, signalCode, pid } = this.child;
        const state = exitCode !== null || signalCode !== null ? `exited (${exitCode ?? signalCode})` : 'running';
        e.message += ` [${method} ${path} to node ${pid} at ${this.address}, ${state}; its output ends:\n${this.output().slice(-3000)}]`;
      }
      throw e;
    }
  }
}

/** How long stop() waits for a node to end after its signal before it kills it. */
const STOP_WAIT_MS = 20_000;

/** The handle of a running node process: its client, and stop (SIGTERM) or kill (SIGKILL). */
export function startedNode(parts: {
  dir: string;
  configPath: string;
  address: string;
  serviceCertificatePem: string;
  spawned: { process: ChildProcess; output: () => string };
  user: ClientIdentity & { id: string };
  member: ClientIdentity & { id: string };
  client?: HttpsClient;
}): StartedNode {
  const child = parts.spawned.process;
  parts.client?.close();
  const client = new NodeClient(parts.address, parts.serviceCertificatePem, child, parts.spawned.output);
  const signal = async (name: NodeJS.Signals) => {
    client.close();
    if (child.exitCode === null && child.signalCode === null) child.kill(name);
    // A node ends within 5 s of SIGTERM (its own bound): one that does not is killed, and says so,
    // rather than holding its test until the runner's timeout.
    const late = setTimeout(() => {
      process.stderr.write(`node ${child.pid} still running ${STOP_WAIT_MS} ms after ${name}: SIGKILL\n${parts.spawned.output().slice(-3000)}\n`);
      child.kill('SIGKILL');
    }, STOP_WAIT_MS);
    try {
      return await waitForExit(child);
    } finally {
      clearTimeout(late);
    }
  };
  return {
    dir: parts.dir,
    configPath: parts.configPath,
    address: parts.address,
    serviceCertificatePem: parts.serviceCertificatePem,
    process: child,
    client,
    user: parts.user,
    member: parts.member,
    output: parts.spawned.output,
    stop: () => signal('SIGTERM'),
    async kill() {
      await signal('SIGKILL');
    },
  };
}

/**
 * Runs a stopped (or killed) node again with the configuration it was started with, and waits
 * until it reports PartOfNetwork at its (new) address, as the service certificate trusts it.
 */
export async function restartNode(node: StartedNode, timeoutMs = 30_000): Promise<StartedNode> {
  const addressesFile = join(node.dir, 'rpc_addresses.json');
  rmSync(addressesFile, { force: true });
  const spawned = spawnNode(node.configPath, node.dir);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (spawned.process.exitCode !== null) throw new Error(`the restarted node exited with ${spawned.process.exitCode}:\n${spawned.output()}`);
    if (Date.now() > deadline) {
      spawned.process.kill('SIGKILL');
      throw new Error(`the restarted node did not become ready:\n${spawned.output()}`);
    }
    if (existsSync(addressesFile)) {
      const address = Object.values(JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>)[0]!;
      const client = new HttpsClient(address, node.serviceCertificatePem);
      const state = await client.request('GET', '/node/state', { timeoutMs: 2000 }).catch(() => undefined);
      if (state?.status === 200 && state.body.state === 'PartOfNetwork') {
        return startedNode({ ...node, address, spawned, client });
      }
      client.close();
    }
    await sleep(50);
  }
}

/** member0 of a test node, as the member commands' client connects through `node`. */
export function memberConnectionOf(node: Pick<StartedNode, 'address' | 'serviceCertificatePem' | 'member'>): MemberConnection {
  return {
    address: node.address,
    caPem: node.serviceCertificatePem,
    certificatePem: node.member.certificatePem,
    privateKeyPem: node.member.privateKeyPem,
    memberId: node.member.id,
  };
}

/**
 * member0 acknowledges and votes transition_service_to_open through `node` (see
 * StartNodeOptions.open), and waits until that node reports the opening committed: a failover
 * cannot roll it back afterwards.
 */
export async function openTestService(node: StartedNode, timeoutMs = 30_000): Promise<void> {
  const { transactionId } = await openService(memberConnectionOf(node), (note) => process.stderr.write(`${note}\n`));
  const opened = parseTxId(transactionId ?? '')?.seqno ?? 0;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const commit = await node.client.request('GET', '/node/commit');
    if ((parseTxId(String(commit.body.transaction_id))?.seqno ?? -1) >= opened) return;
    if (Date.now() > deadline) throw new Error(`the opening ${transactionId} was not committed within ${timeoutMs} ms`);
    await sleep(20);
  }
}

export async function startNode(options: StartNodeOptions = {}): Promise<StartedNode> {
  const prepared = await prepareStartNode(options);
  try {
    return await startPrepared(prepared, options);
  } catch (e) {
    // A folder made here is removed when the node does not start (the error carries its output).
    if (options.dir === undefined) removeDir(prepared.dir);
    throw e;
  }
}

async function startPrepared(prepared: Awaited<ReturnType<typeof prepareStartNode>>, options: StartNodeOptions): Promise<StartedNode> {
  const { dir, configPath } = prepared;
  const spawned = spawnNode(configPath, dir, options.env);
  const child = spawned.process;
  const addressesFile = join(dir, 'rpc_addresses.json');
  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  let address = '';
  while (!address) {
    if (child.exitCode !== null) throw new Error(`node exited with ${child.exitCode}:\n${spawned.output()}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await waitForExit(child);
      throw new Error(`node did not become ready:\n${spawned.output()}`);
    }
    // The addresses are written when the interfaces listen; the service certificate once the service exists.
    if (existsSync(addressesFile) && existsSync(join(dir, 'service_cert.pem'))) {
      address = Object.values(JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>)[0]!;
    } else await sleep(50);
  }
  let serviceCertificatePem: string;
  try {
    serviceCertificatePem = readFileSync(join(dir, 'service_cert.pem'), 'utf8');
  } catch (e) {
    child.kill('SIGKILL');
    await waitForExit(child);
    throw e;
  }
  const node = startedNode({ dir, configPath, address, serviceCertificatePem, spawned, user: prepared.user, member: prepared.member });
  if (options.open ?? true) {
    try {
      await openTestService(node);
    } catch (e) {
      await node.kill();
      throw new Error(`the service could not be opened: ${(e as Error).message}:\n${spawned.output()}`);
    }
  }
  return node;
}

export interface JoinNodeOptions {
  /** RPC address of a node of the network. */
  readonly target: string;
  readonly serviceCertificatePem: string;
  readonly configPatch?: Record<string, unknown>;
  readonly dir?: string;
  /** Wait until the node answers with the service certificate as CA (it joined and was endorsed). */
  readonly waitUntilJoined?: boolean;
  readonly readyTimeoutMs?: number;
  readonly user: ClientIdentity & { id: string };
  readonly member: ClientIdentity & { id: string };
  /** Extra environment of the node process (e.g. COVENANT_VIRTUAL_HOST_DATA). */
  readonly env?: Record<string, string>;
  /**
   * While waiting for the join: once the node is Pending (the service is open), member0 proposes
   * and votes transition_node_to_trusted for it through the target. Default: waitUntilJoined.
   */
  readonly trust?: boolean;
  /** More arguments of that transition_node_to_trusted (valid_from, validity_period_days). */
  readonly trustArgs?: Record<string, unknown>;
}

/** What a joiner needs to join the network of `node`: its address, the service certificate and the test identities. */
export function joinOptionsOf(node: StartedNode): Pick<JoinNodeOptions, 'target' | 'serviceCertificatePem' | 'user' | 'member'> {
  return { target: node.address, serviceCertificatePem: node.serviceCertificatePem, user: node.user, member: node.member };
}

/** Starts a node with command.type Join against `target`. */
export async function startJoiningNode(options: JoinNodeOptions): Promise<StartedNode> {
  if (options.dir !== undefined) return startJoiningNodeIn(options.dir, options);
  // A folder made here is removed when the join fails (the error carries the node's output).
  const dir = mkdtempSync(join(tmpdir(), 'covenant-join-'));
  try {
    return await startJoiningNodeIn(dir, options);
  } catch (e) {
    removeDir(dir);
    throw e;
  }
}

async function startJoiningNodeIn(dir: string, options: JoinNodeOptions): Promise<StartedNode> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'service_cert.pem'), options.serviceCertificatePem);
  const configPath = writeNodeConfig(
    dir,
    { type: 'Join', service_certificate_file: 'service_cert.pem', join: { target_rpc_address: options.target, retry_timeout: '100ms' } },
    options.configPatch,
  );
  const addressesFile = join(dir, 'rpc_addresses.json');
  // Written again once the node listens: never read the previous run's addresses.
  rmSync(addressesFile, { force: true });
  const spawned = spawnNode(configPath, dir, options.env);
  const child = spawned.process;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  let address = '';
  const fail = async (why: string) => {
    child.kill('SIGKILL');
    await waitForExit(child);
    return new Error(`${why}:\n${spawned.output()}`);
  };
  const waitUntilJoined = options.waitUntilJoined ?? true;
  while (!address) {
    // A caller that does not wait for the join may expect the node to give up: hand it the exited node.
    if (child.exitCode !== null && !waitUntilJoined) break;
    if (child.exitCode !== null) throw new Error(`joining node exited with ${child.exitCode}:\n${spawned.output()}`);
    if (Date.now() > deadline) throw await fail('joining node did not listen in time');
    if (existsSync(addressesFile)) address = Object.values(JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>)[0]!;
    else await sleep(50);
  }
  const client = new HttpsClient(address || '127.0.0.1:0', options.serviceCertificatePem);
  const trust = options.trust ?? waitUntilJoined;
  let trusted = false;
  if (waitUntilJoined) {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`joining node exited with ${child.exitCode}:\n${spawned.output()}`);
      if (Date.now() > deadline) throw await fail('joining node did not join in time');
      if (trust && !trusted) {
        try {
          trusted = await trustIfPending(dir, options);
        } catch (e) {
          // The proposal or the vote failed: the node is stopped, not left running behind the test.
          throw await fail(`the joiner could not be trusted (${(e as Error).message})`);
        }
      }
      try {
        const state = await client.request('GET', '/node/state', { timeoutMs: 2000 });
        if (state.status === 200 && state.body.state === 'PartOfNetwork') break;
      } catch {
        // Not endorsed yet: the service certificate does not verify its TLS certificate.
      }
      await sleep(50);
    }
  }
  return startedNode({ dir, configPath, address, serviceCertificatePem: options.serviceCertificatePem, spawned, user: options.user, member: options.member, client });
}

/**
 * If the joiner in `dir` is Pending on the network (it wrote its self-signed certificate, and the
 * target lists its node id as Pending), member0 proposes and votes to trust it. Whether it did.
 */
async function trustIfPending(dir: string, options: JoinNodeOptions): Promise<boolean> {
  let nodeId: string;
  try {
    nodeId = nodeIdFromPublicKey(new X509Certificate(readFileSync(join(dir, 'node_cert.pem'))).publicKey);
  } catch {
    return false; // not written yet (or being written)
  }
  const connection = memberConnectionOf({ address: options.target, serviceCertificatePem: options.serviceCertificatePem, member: options.member });
  const target = new HttpsClient(options.target, options.serviceCertificatePem);
  try {
    const record = await target.request('GET', `/node/network/nodes/${nodeId}`, { timeoutMs: 2000 });
    if (record.status !== 200 || record.body.status !== 'Pending') return false;
  } catch {
    return false;
  } finally {
    target.close();
  }
  const proposal = await propose(connection, [{ name: 'transition_node_to_trusted', args: { node_id: nodeId, ...options.trustArgs } }]);
  const id = (proposal.body as { proposal_id: string }).proposal_id;
  if ((proposal.body as { state: string }).state === 'Open') await vote(connection, id, ACCEPT_BALLOT);
  return true;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
