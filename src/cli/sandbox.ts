/**
 * `covenant sandbox`: a local network for trying Covenant with curl. Creates one member and one
 * user identity, writes each node's configuration, starts every node as its own OS process,
 * waits until the service answers, writes DIR/network.json, prints how to call it, and stops its
 * nodes on SIGINT/SIGTERM. With --recover-from, recovers an old sandbox's network from its
 * ledgers instead (sandbox-recover.ts).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { errorMessage } from '../base/errors.js';
import { generateRsaKeyPair } from '../crypto/index.js';
import { openService } from './member.js';
import { bundleOf, deployApp } from './app.js';
import { writeFileAtomic } from './node-command.js';
import { prepareSandboxDir, readConfigFragment, SANDBOX_CERTIFICATE_VALIDITY_DAYS, SandboxNodes, sealingConfigOf, sealingLocations, writeIdentity, type NetworkJson } from './sandbox-nodes.js';

export type { NetworkJson } from './sandbox-nodes.js';
export { getJson } from './sandbox-nodes.js';

export interface SandboxOptions {
  readonly nodes: number;
  readonly dir: string;
  readonly nodeConfigFile?: string;
  /** Seconds to wait for the service to be ready. */
  readonly readyTimeoutSeconds: number;
  /** Configure sealing-based recovery on every node (each a location of the decision protocol). */
  readonly sealing?: boolean;
  /** Wipe `dir` if it already holds anything (refused otherwise). */
  readonly force?: boolean;
  /** A folder with an application bundle (app.json and its modules), deployed once the service is open. */
  readonly appDir?: string;
  readonly print: (line: string) => void;
}

export async function runSandbox(options: SandboxOptions): Promise<void> {
  const dir = resolve(options.dir);
  // Read before anything is created: a bad fragment would otherwise surface as a node's exit.
  const fragment = options.nodeConfigFile ? readConfigFragment(options.nodeConfigFile) : {};
  const app = options.appDir !== undefined ? bundleOf(options.appDir) : undefined;
  prepareSandboxDir(dir, options.force === true);
  const common = join(dir, 'common');
  mkdirSync(common, { recursive: true });
  const { print } = options;

  print(`Creating identities in ${common}`);
  const member = await writeIdentity(common, 'member0');
  const rsa = generateRsaKeyPair(2048);
  const memberEncPub = join(common, 'member0_enc_pubk.pem');
  const memberEncPriv = join(common, 'member0_enc_privk.pem');
  writeFileAtomic(memberEncPub, rsa.publicKeyPem);
  writeFileAtomic(memberEncPriv, rsa.privateKeyPem, 0o600);
  const user = await writeIdentity(common, 'user0');
  const serviceCert = join(common, 'service_cert.pem');

  const nodes = new SandboxNodes(dir, fragment, options.readyTimeoutSeconds, print);
  const sealing = options.sealing ? await sealingLocations(options.nodes) : undefined;
  const sealingOf = (i: number) => (sealing ? { sealing_recovery: sealingConfigOf(sealing, i, join(nodes.nodeDir(i), 'virtual_cpu_key')) } : {});
  if (sealing) print(`Sealing-based recovery: every node a location of the recovery decision protocol (${sealing.map((l) => `${l.name} ${l.address}`).join(', ')})`);
  // The first node starts the service; the others join it while it is still opening, so they
  // are trusted at once.
  nodes.spawn(0, {
    type: 'Start',
    service_certificate_file: serviceCert,
    start: {
      members: [{ certificate_file: member.cert, encryption_public_key_file: memberEncPub }],
      users: [{ certificate_file: user.cert }],
      initial_service_certificate_validity_days: SANDBOX_CERTIFICATE_VALIDITY_DAYS,
    },
  }, sealingOf(0));
  await nodes.waitState(0, ['PartOfNetwork'], serviceCert);
  for (let i = 1; i < options.nodes; i++) {
    nodes.spawn(i, {
      type: 'Join',
      service_certificate_file: serviceCert,
      join: { target_rpc_address: nodes.entries[0]!.rpc_address, retry_timeout: '200ms' },
    }, sealingOf(i));
  }
  for (let i = 1; i < options.nodes; i++) await nodes.waitState(i, ['PartOfNetwork'], serviceCert);

  // The sandbox is for trying the service as a user: its member acknowledges and opens it.
  print('Opening the service: member0 acknowledges the state digest and votes transition_service_to_open');
  const memberConnection = {
    address: nodes.entries[0]!.rpc_address,
    caPem: readFileSync(serviceCert, 'utf8'),
    certificatePem: readFileSync(member.cert, 'utf8'),
    privateKeyPem: readFileSync(member.private_key, 'utf8'),
    memberId: member.id,
  };
  try {
    await openService(memberConnection, print);
  } catch (e) {
    nodes.stopAll();
    throw new Error(`the service could not be opened: ${errorMessage(e)}`);
  }
  if (app !== undefined) {
    print(`Deploying the application in ${options.appDir}`);
    try {
      await deployApp(app, [memberConnection], print);
    } catch (e) {
      nodes.stopAll();
      throw new Error(`the application could not be deployed: ${errorMessage(e)}`);
    }
  }

  const network: NetworkJson = {
    service_certificate: serviceCert,
    sandbox_pid: process.pid,
    nodes: nodes.entries,
    members: [{ id: member.id, cert: member.cert, private_key: member.private_key, encryption_private_key: memberEncPriv }],
    users: [{ id: user.id, cert: user.cert, private_key: user.private_key }],
  };
  writeFileAtomic(join(dir, 'network.json'), JSON.stringify(network, null, 2) + '\n');
  printReady(network, join(dir, 'network.json'), print);
  await nodes.foreground(join(dir, 'network.json'));
}

/** The sandbox's ready message: the network, and ready-to-paste commands. */
export function printReady(network: NetworkJson, networkFile: string, print: (line: string) => void): void {
  const first = network.nodes[0]!;
  const user = network.users[0]!;
  const serviceCert = network.service_certificate;
  const count = network.nodes.length;
  print('');
  print(`Covenant sandbox is ready (${count} node${count > 1 ? 's' : ''}); network description: ${networkFile}`);
  for (const n of network.nodes) print(`  node ${n.node_id.slice(0, 12)}…  https://${n.rpc_address}  (pid ${n.pid})`);
  print('');
  print('Try it:');
  print(`  curl --cacert ${serviceCert} https://${first.rpc_address}/node/network`);
  print(
    `  curl --cacert ${serviceCert} --cert ${user.cert} --key ${user.private_key} ` +
      `-H 'content-type: application/json' -d '{"id": 1, "msg": "hello"}' -i https://${first.rpc_address}/app/log/private`,
  );
  print(`  curl --cacert ${serviceCert} --cert ${user.cert} --key ${user.private_key} 'https://${first.rpc_address}/app/log/private?id=1'`);
  print('');
  print(`Certificates are valid for ${SANDBOX_CERTIFICATE_VALIDITY_DAYS} days; members renew them by proposal (set_service_certificate_validity, set_all_nodes_certificate_validity).`);
  print(`Add a node: covenant sandbox add-node --network ${networkFile}`);
  print(`Press Ctrl-C (or kill -INT ${process.pid}, this sandbox's pid, recorded in network.json) to stop every node.`);
}
