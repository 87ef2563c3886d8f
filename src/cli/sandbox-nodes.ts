/**
 * The sandbox's node processes: each node's folder and configuration, its process and log, waiting
 * for a node to reach a state (through GET /node/state, trusting a given certificate), stopping
 * one or all, and staying in the foreground until SIGINT/SIGTERM. Shared by `covenant sandbox`
 * and `covenant sandbox --recover-from`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorMessage } from '../base/errors.js';
import { deepMerge } from '../config/index.js';
import { generateIdentity } from '../crypto/index.js';
import { HttpsClient } from '../platform/https-client.js';
import { writeFileAtomic } from './node-command.js';

const CLI_ENTRY = fileURLToPath(new URL('./main.js', import.meta.url));

/** A word for a POSIX shell: single-quoted unless it is plainly safe. */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/**
 * The command line that runs the node of `configPath` again: absolute paths of this Node.js and of
 * the CLI entry point, so that it works from any folder (npx resolves `covenant` from the current
 * folder only, and may fetch an unrelated package of that name elsewhere).
 */
export function nodeRestartCommand(configPath: string): string {
  return [process.execPath, CLI_ENTRY, 'node', '--config', configPath].map(shellWord).join(' ');
}

/** The command line of process `pid`, if it runs (Linux /proc). */
export function processCommandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return undefined;
  }
}

/**
 * Makes `dir` ready for a new sandbox. A folder that already holds anything is refused unless
 * `force` (which wipes it: keys and ledgers are lost); a folder whose network.json names a node
 * that still runs is refused even then.
 */
export function prepareSandboxDir(dir: string, force: boolean): void {
  if (!existsSync(dir)) return;
  const entries = readdirSync(dir);
  if (entries.length === 0) return;
  const networkFile = join(dir, 'network.json');
  if (existsSync(networkFile)) {
    let running: NetworkNode | undefined;
    try {
      const network = JSON.parse(readFileSync(networkFile, 'utf8')) as NetworkJson;
      running = network.nodes.find((n) => processCommandLine(n.pid)?.includes(n.config));
    } catch {
      running = undefined; // an unreadable network.json names no running node
    }
    if (running !== undefined) throw new Error(`${dir} is a sandbox whose node (pid ${running.pid}) still runs: stop it first (Ctrl-C in its sandbox, or kill its sandbox's pid)`);
  }
  if (!force) throw new Error(`${dir} already exists and is not empty (${entries.slice(0, 3).join(', ')}${entries.length > 3 ? ', ...' : ''}): its keys and ledgers would be lost; choose another --dir, or give --force to wipe it`);
  rmSync(dir, { recursive: true, force: true });
}

/** One node of network.json. */
export interface NetworkNode {
  node_id: string;
  rpc_address: string;
  pid: number;
  node_certificate: string;
  ledger_dir: string;
  snapshots_dir: string;
  config: string;
  restart_command: string;
}

export interface NetworkJson {
  service_certificate: string;
  /** The pid of the `covenant sandbox` process that runs the network: SIGINT or SIGTERM to it stops every node. */
  sandbox_pid?: number;
  /** restart_command runs the node again after a stop or a crash: it resumes from its own ledger and state. */
  nodes: NetworkNode[];
  members: { id: string; cert: string; private_key: string; encryption_private_key: string }[];
  users: { id: string; cert: string; private_key: string }[];
}

export interface IdentityFiles {
  id: string;
  cert: string;
  private_key: string;
}

export async function writeIdentity(dir: string, name: string): Promise<IdentityFiles> {
  const identity = await generateIdentity({ commonName: name, curve: 'P-384' });
  const cert = join(dir, `${name}_cert.pem`);
  const key = join(dir, `${name}_privk.pem`);
  writeFileAtomic(cert, identity.certificatePem);
  writeFileAtomic(key, identity.privateKeyPem, 0o600);
  return { id: identity.id, cert, private_key: key };
}

/** GET over TLS trusting only `ca`; resolves with status and parsed body. */
export async function getJson(address: string, path: string, ca: string): Promise<{ status: number; body: unknown }> {
  const client = new HttpsClient(address, ca);
  try {
    const answer = await client.request('GET', path, { timeoutMs: 5000 });
    return { status: answer.status, body: answer.body ?? answer.text };
  } finally {
    client.close();
  }
}

/** The --node-config fragment: a JSON object, or an error naming the option and the file. */
export function readConfigFragment(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`--node-config ${file}: cannot read it (${errorMessage(e)})`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`--node-config ${file}: not JSON (${errorMessage(e)})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(`--node-config ${file}: must be a JSON object (a fragment of a node configuration)`);
  }
  return value as Record<string, unknown>;
}

/** The last `lines` non-empty lines of a log file, indented; a note if it cannot be read. */
function logTail(file: string, lines: number): string {
  try {
    const all = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '');
    return all.slice(-lines).map((l) => `  ${l}`).join('\n');
  } catch (e) {
    return `  (cannot read it: ${errorMessage(e)})`;
  }
}

/** The last `lines` fail or fatal lines of a node's log (text or JSON format), or its tail when it has none. */
export function lastErrorLines(file: string, lines: number): string {
  try {
    const all = readFileSync(file, 'utf8').split('\n');
    const errors = all.filter((l) => /^\S+ (fail|fatal)\b/.test(l) || /"level":"(fail|fatal)"/.test(l));
    return errors.length === 0 ? logTail(file, lines) : errors.slice(-lines).map((l) => `  ${l}`).join('\n');
  } catch (e) {
    return `  (cannot read it: ${errorMessage(e)})`;
  }
}

/** A sealing location of the recovery decision protocol. */
export interface SealingLocation {
  readonly name: string;
  readonly address: string;
}

/** One location per node, each on a loopback port free now (its address must be known before the nodes start). */
export async function sealingLocations(count: number): Promise<SealingLocation[]> {
  const out: SealingLocation[] = [];
  for (let i = 0; i < count; i++) {
    const port = await new Promise<number>((resolvePort, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const bound = (server.address() as AddressInfo).port;
        server.close(() => resolvePort(bound));
      });
    });
    out.push({ name: `location${i}`, address: `127.0.0.1:${port}` });
  }
  return out;
}

/** Node i's sealing_recovery section: its location, its virtual CPU key file, every location expected (failover off unless given). */
export function sealingConfigOf(locations: readonly SealingLocation[], i: number, cpuKeyFile: string, failoverTimeout = '0ms'): Record<string, unknown> {
  return { location: locations[i], virtual_cpu_key_file: cpuKeyFile, recovery_decision_protocol: { expected_locations: locations, failover_timeout: failoverTimeout } };
}

/** The signals that stop a sandbox and every node it runs. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What GET /node/state answered, as far as the sandbox reads it. */
export interface NodeStateReport {
  state: string;
  node_id: string;
  last_signed_seqno?: number;
}

/**
 * Validity of a sandbox's certificates (service and nodes), where a service's default is one day:
 * a sandbox is left running over nights and weekends, and renewing by itself would have its one
 * member sign proposals in the background and rewrite the certificate file curl trusts. Members
 * renew them by proposal as on any service (docs/certificates.md), within the default maximum.
 */
export const SANDBOX_CERTIFICATE_VALIDITY_DAYS = 365;

export class SandboxNodes {
  readonly entries: NetworkNode[] = [];
  private readonly children: ChildProcess[] = [];
  private readonly deadlineMs: number;
  readonly readyTimeoutMs: number;

  constructor(
    private readonly dir: string,
    private readonly fragment: Record<string, unknown>,
    private readonly readyTimeoutSeconds: number,
    private readonly print: (line: string) => void,
  ) {
    this.readyTimeoutMs = readyTimeoutSeconds * 1000;
    this.deadlineMs = Date.now() + this.readyTimeoutMs;
    process.on('exit', () => this.stopAll());
    // Until the network is ready (foreground takes over), a signal stops the nodes started so far:
    // Node's default action would end this process without its 'exit' handlers, leaving them running.
    for (const signal of STOP_SIGNALS) process.once(signal, this.stopEarly);
  }

  private readonly stopEarly = (signal: NodeJS.Signals): void => {
    this.print(`${signal}: stopping the nodes started so far`);
    this.stopAll();
    process.exit(1);
  };

  nodeDir(i: number): string {
    return join(this.dir, `node${i}`);
  }

  /**
   * Writes node i's configuration (the sandbox's base, `extra`, then the --node-config fragment)
   * into a fresh folder (unless `keepFolder`, when the caller already put files there) and starts it.
   */
  spawn(i: number, command: Record<string, unknown>, extra: Record<string, unknown> = {}, keepFolder = false): NetworkNode {
    const nodeDir = this.nodeDir(i);
    if (!keepFolder) rmSync(nodeDir, { recursive: true, force: true });
    mkdirSync(nodeDir, { recursive: true });
    const base = {
      command,
      node_certificate: { subject_alt_names: ['iPAddress:127.0.0.1', 'dNSName:localhost'], initial_validity_days: SANDBOX_CERTIFICATE_VALIDITY_DAYS },
      node_certificate_file: join(nodeDir, 'node_cert.pem'),
      rpc_interfaces: {
        primary_rpc_interface: {
          bind_address: '127.0.0.1:0',
          enabled_operator_features: ['LedgerChunkRead', 'SnapshotRead', 'SnapshotCreate'],
        },
      },
      node_to_node_interface: { bind_address: '127.0.0.1:0' },
      ledger: { directory: join(nodeDir, 'ledger') },
      snapshots: { directory: join(nodeDir, 'snapshots') },
      output_files: { rpc_addresses_file: join(nodeDir, 'rpc_addresses.json') },
    };
    const config = deepMerge(deepMerge(base, extra as never), this.fragment as never) as Record<string, unknown>;
    const configPath = join(nodeDir, 'node.json');
    writeFileAtomic(configPath, JSON.stringify(config, null, 2) + '\n');
    const out = openSync(join(nodeDir, 'out.log'), 'a');
    const child = spawn(process.execPath, ['--enable-source-maps', CLI_ENTRY, 'node', '--config', configPath], {
      stdio: ['ignore', out, out],
      cwd: nodeDir,
    });
    this.children[i] = child;
    this.print(`Started node ${i} (pid ${child.pid}), log ${join(nodeDir, 'out.log')}`);
    const entry: NetworkNode = {
      node_id: '',
      rpc_address: '',
      pid: child.pid ?? -1,
      node_certificate: join(nodeDir, 'node_cert.pem'),
      ledger_dir: join(nodeDir, 'ledger'),
      snapshots_dir: join(nodeDir, 'snapshots'),
      config: configPath,
      restart_command: nodeRestartCommand(configPath),
    };
    this.entries[i] = entry;
    return entry;
  }

  /**
   * Waits until node i answers GET /node/state with one of `states`, trusting the certificate in
   * the file `caFile` (the service's, or a recover node's own); fills its node id and address.
   */
  async waitState(i: number, states: readonly string[], caFile: string): Promise<NodeStateReport> {
    const entry = this.entries[i]!;
    const child = this.children[i]!;
    const addressesFile = join(this.nodeDir(i), 'rpc_addresses.json');
    for (;;) {
      if (child.exitCode !== null) {
        this.stopAll();
        const log = join(this.nodeDir(i), 'out.log');
        throw new Error(`node ${i} exited with status ${child.exitCode}; the end of ${log}:\n${logTail(log, 5)}`);
      }
      if (Date.now() > this.deadlineMs) {
        this.stopAll();
        const log = join(this.nodeDir(i), 'out.log');
        throw new Error(`node ${i} did not reach ${states.join(' or ')} within ${this.readyTimeoutSeconds}s; its last errors, in ${log}:\n${lastErrorLines(log, 5)}`);
      }
      if (existsSync(addressesFile) && existsSync(caFile)) {
        const addresses = JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>;
        entry.rpc_address = Object.values(addresses)[0]!;
        try {
          const answer = await getJson(entry.rpc_address, '/node/state', readFileSync(caFile, 'utf8'));
          const body = answer.body as NodeStateReport;
          if (answer.status === 200 && states.includes(body.state)) {
            entry.node_id = body.node_id ?? '';
            return body;
          }
        } catch (e) {
          // Not answering yet (or not yet endorsed by the service).
          void errorMessage(e);
        }
      }
      await sleep(100);
    }
  }

  /** Stops node i (SIGTERM) and waits for it to exit; it stays out of the foreground wait. */
  async stop(i: number): Promise<void> {
    const child = this.children[i];
    if (child === undefined) return;
    if (this.running(child)) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    this.children[i] = undefined as never;
  }

  stopAll(): void {
    for (const child of this.children) if (child !== undefined && this.running(child)) child.kill('SIGTERM');
  }

  /**
   * Stays in the foreground until SIGINT or SIGTERM, then stops every node and waits for them:
   * its own children, and the nodes `covenant sandbox add-node` recorded in `networkFile` since.
   */
  async foreground(networkFile?: string): Promise<void> {
    const children = this.children.filter((c) => c !== undefined);
    for (const signal of STOP_SIGNALS) process.removeListener(signal, this.stopEarly);
    // In the foreground until a signal, even once every node it started has died: signal listeners
    // keep no process alive, and nodes added to the sandbox (or restarted by hand) are still its own to stop.
    const keepAlive = setInterval(() => undefined, 60_000);
    await new Promise<void>((resolvePromise) => {
      const stop = (signal: string) => {
        clearInterval(keepAlive);
        const added = networkFile === undefined ? [] : this.addedNodes(networkFile);
        this.print(`\n${signal}: stopping ${children.length + added.length} node(s)`);
        this.stopAll();
        for (const node of added) process.kill(node.pid, 'SIGTERM');
        resolvePromise();
      };
      for (const signal of STOP_SIGNALS) process.once(signal, () => stop(signal));
      for (const [i, child] of this.children.entries()) {
        child?.once('exit', (code, signal) => this.print(`node ${i} exited (${signal ?? code})`));
      }
    });
    await Promise.all(children.map((c) => (this.running(c) ? new Promise((r) => c.once('exit', r)) : Promise.resolve())));
  }

  /** Nodes of network.json that this process did not start and that still run as themselves. */
  private addedNodes(networkFile: string): NetworkNode[] {
    let network: NetworkJson;
    try {
      network = JSON.parse(readFileSync(networkFile, 'utf8')) as NetworkJson;
    } catch (e) {
      this.print(`cannot read ${networkFile} for nodes added later: ${errorMessage(e)}`);
      return [];
    }
    const own = new Set(this.children.map((c) => c?.pid));
    return network.nodes.filter((n) => !own.has(n.pid) && processCommandLine(n.pid)?.includes(n.config));
  }

  // A node that ended by a signal (killed by an operator) has no exit code, only its signal.
  private running(child: ChildProcess): boolean {
    return child.exitCode === null && child.signalCode === null;
  }
}
