/**
 * `covenant sandbox`: a local network for trying Covenant with curl. Creates one member and one
 * user identity, writes each node's configuration, starts every node as its own OS process,
 * waits until the service answers, writes DIR/network.json, prints how to call it, and stops its
 * nodes on SIGINT/SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorMessage } from '../base/errors.js';
import { deepMerge } from '../config/index.js';
import { generateIdentity, generateRsaKeyPair } from '../crypto/index.js';
import { openService } from './member.js';
import { writeFileAtomic } from './node-command.js';
import { HttpsClient } from '../platform/https-client.js';

export interface SandboxOptions {
  readonly nodes: number;
  readonly dir: string;
  readonly nodeConfigFile?: string;
  /** Seconds to wait for the service to be ready. */
  readonly readyTimeoutSeconds: number;
  readonly print: (line: string) => void;
}

export interface NetworkJson {
  service_certificate: string;
  /** restart_command runs the node again after a stop or a crash: it resumes from its own ledger and state. */
  nodes: { node_id: string; rpc_address: string; pid: number; node_certificate: string; ledger_dir: string; snapshots_dir: string; config: string; restart_command: string }[];
  members: { id: string; cert: string; private_key: string; encryption_private_key: string }[];
  users: { id: string; cert: string; private_key: string }[];
}

const CLI_ENTRY = fileURLToPath(new URL('./main.js', import.meta.url));

interface IdentityFiles {
  id: string;
  cert: string;
  private_key: string;
}

async function writeIdentity(dir: string, name: string): Promise<IdentityFiles> {
  const identity = await generateIdentity({ commonName: name, curve: 'P-384' });
  const cert = join(dir, `${name}_cert.pem`);
  const key = join(dir, `${name}_privk.pem`);
  writeFileAtomic(cert, identity.certificatePem);
  writeFileAtomic(key, identity.privateKeyPem);
  return { id: identity.id, cert, private_key: key };
}

/** GET over TLS trusting only the service certificate; resolves with status and parsed body. */
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
function readConfigFragment(file: string): Record<string, unknown> {
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runSandbox(options: SandboxOptions): Promise<void> {
  const dir = resolve(options.dir);
  // Read before anything is created: a bad fragment would otherwise surface as a node's exit.
  const fragment = options.nodeConfigFile ? readConfigFragment(options.nodeConfigFile) : {};
  if (existsSync(join(dir, 'network.json'))) rmSync(join(dir, 'network.json'));
  const common = join(dir, 'common');
  mkdirSync(common, { recursive: true });
  const { print } = options;

  print(`Creating identities in ${common}`);
  const member = await writeIdentity(common, 'member0');
  const rsa = generateRsaKeyPair(2048);
  const memberEncPub = join(common, 'member0_enc_pubk.pem');
  const memberEncPriv = join(common, 'member0_enc_privk.pem');
  writeFileAtomic(memberEncPub, rsa.publicKeyPem);
  writeFileAtomic(memberEncPriv, rsa.privateKeyPem);
  const user = await writeIdentity(common, 'user0');
  const serviceCert = join(common, 'service_cert.pem');

  const children: ChildProcess[] = [];
  // A node that ended by a signal (killed by an operator) has no exit code, only its signal.
  const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;
  const stopAll = () => {
    for (const child of children) if (running(child)) child.kill('SIGTERM');
  };
  process.on('exit', stopAll);

  const nodes: NetworkJson['nodes'] = [];
  const spawnNode = (i: number, command: Record<string, unknown>) => {
    const nodeDir = join(dir, `node${i}`);
    rmSync(nodeDir, { recursive: true, force: true });
    mkdirSync(nodeDir, { recursive: true });
    const base = {
      command,
      node_certificate: { subject_alt_names: ['iPAddress:127.0.0.1', 'dNSName:localhost'] },
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
    const config = deepMerge(base, fragment as never) as Record<string, unknown>;
    const configPath = join(nodeDir, 'node.json');
    writeFileAtomic(configPath, JSON.stringify(config, null, 2) + '\n');
    const out = openSync(join(nodeDir, 'out.log'), 'a');
    const child = spawn(process.execPath, ['--enable-source-maps', CLI_ENTRY, 'node', '--config', configPath], {
      stdio: ['ignore', out, out],
      cwd: nodeDir,
    });
    children.push(child);
    print(`Started node ${i} (pid ${child.pid}), log ${join(nodeDir, 'out.log')}`);
    nodes.push({
      node_id: '',
      rpc_address: '',
      pid: child.pid ?? -1,
      node_certificate: join(nodeDir, 'node_cert.pem'),
      ledger_dir: join(nodeDir, 'ledger'),
      snapshots_dir: join(nodeDir, 'snapshots'),
      config: configPath,
      restart_command: `npx covenant node --config ${configPath}`,
    });
  };

  const deadline = Date.now() + options.readyTimeoutSeconds * 1000;
  /** Waits until node i answers GET /node/state as PartOfNetwork with the service certificate as CA. */
  const waitReady = async (i: number) => {
    const entry = nodes[i]!;
    const child = children[i]!;
    const addressesFile = join(dir, `node${i}`, 'rpc_addresses.json');
    for (;;) {
      if (child.exitCode !== null) {
        stopAll();
        const log = join(dir, `node${i}`, 'out.log');
        throw new Error(`node ${i} exited with status ${child.exitCode}; the end of ${log}:\n${logTail(log, 5)}`);
      }
      if (Date.now() > deadline) {
        stopAll();
        throw new Error(`node ${i} was not ready within ${options.readyTimeoutSeconds}s; see ${join(dir, `node${i}`, 'out.log')}`);
      }
      if (existsSync(addressesFile) && existsSync(serviceCert)) {
        const addresses = JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>;
        entry.rpc_address = Object.values(addresses)[0]!;
        try {
          const state = await getJson(entry.rpc_address, '/node/state', readFileSync(serviceCert, 'utf8'));
          const body = state.body as { state?: string; node_id?: string };
          if (state.status === 200 && body.state === 'PartOfNetwork') {
            entry.node_id = body.node_id ?? '';
            return;
          }
        } catch (e) {
          // Not answering yet (or not yet endorsed by the service).
          void errorMessage(e);
        }
      }
      await sleep(100);
    }
  };

  // The first node starts the service; the others join it while it is still opening, so they
  // are trusted at once.
  spawnNode(0, {
    type: 'Start',
    service_certificate_file: serviceCert,
    start: {
      members: [{ certificate_file: member.cert, encryption_public_key_file: memberEncPub }],
      users: [{ certificate_file: user.cert }],
    },
  });
  await waitReady(0);
  for (let i = 1; i < options.nodes; i++) {
    spawnNode(i, {
      type: 'Join',
      service_certificate_file: serviceCert,
      join: { target_rpc_address: nodes[0]!.rpc_address, retry_timeout: '200ms' },
    });
  }
  for (let i = 1; i < options.nodes; i++) await waitReady(i);

  // The sandbox is for trying the service as a user: its member acknowledges and opens it.
  print('Opening the service: member0 acknowledges the state digest and votes transition_service_to_open');
  try {
    await openService({
      address: nodes[0]!.rpc_address,
      caPem: readFileSync(serviceCert, 'utf8'),
      certificatePem: readFileSync(member.cert, 'utf8'),
      privateKeyPem: readFileSync(member.private_key, 'utf8'),
      memberId: member.id,
    });
  } catch (e) {
    stopAll();
    throw new Error(`the service could not be opened: ${errorMessage(e)}`);
  }

  const network: NetworkJson = {
    service_certificate: serviceCert,
    nodes,
    members: [{ id: member.id, cert: member.cert, private_key: member.private_key, encryption_private_key: memberEncPriv }],
    users: [{ id: user.id, cert: user.cert, private_key: user.private_key }],
  };
  writeFileAtomic(join(dir, 'network.json'), JSON.stringify(network, null, 2) + '\n');

  const first = nodes[0]!;
  print('');
  print(`Covenant sandbox is ready (${nodes.length} node${nodes.length > 1 ? 's' : ''}); network description: ${join(dir, 'network.json')}`);
  for (const n of nodes) print(`  node ${n.node_id.slice(0, 12)}…  https://${n.rpc_address}  (pid ${n.pid})`);
  print('');
  print('Try it:');
  print(`  curl --cacert ${serviceCert} https://${first.rpc_address}/node/network`);
  print(
    `  curl --cacert ${serviceCert} --cert ${user.cert} --key ${user.private_key} ` +
      `-H 'content-type: application/json' -d '{"id": 1, "msg": "hello"}' -i https://${first.rpc_address}/app/log/private`,
  );
  print(`  curl --cacert ${serviceCert} --cert ${user.cert} --key ${user.private_key} 'https://${first.rpc_address}/app/log/private?id=1'`);
  print('');
  print('Press Ctrl-C to stop the network.');

  await new Promise<void>((resolvePromise) => {
    const stop = (signal: string) => {
      print(`\n${signal}: stopping ${children.length} node(s)`);
      stopAll();
      resolvePromise();
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
    for (const [i, child] of children.entries()) {
      child.once('exit', (code, signal) => {
        print(`node ${i} exited (${signal ?? code})`);
      });
    }
  });
  await Promise.all(children.map((c) => (running(c) ? new Promise((r) => c.once('exit', r)) : Promise.resolve())));
}
