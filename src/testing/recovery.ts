/**
 * Disaster recovery for end-to-end tests and benchmarks: recovery members (a signing identity and
 * an RSA encryption key each), a Start configuration that makes them the service's members, and
 * recover nodes (command.type Recover) on copies of an old node's ledger and snapshot folders.
 */
import { generateKeyPairSync } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { certificateId, generateIdentity } from '../crypto/index.js';
import { passProposal, submitRecoveryShare, type MemberConnection } from '../cli/member.js';
import { HttpsClient, type ClientIdentity } from '../platform/https-client.js';
import { spawnNode, startedNode, type StartedNode } from './node-process.js';

export interface RecoveryMember {
  readonly index: number;
  /** Written into the node folder (member<i>_cert.pem); member 0's by prepareStartNode. */
  readonly certificateFile: string;
  readonly encryptionPublicKeyFile: string;
  readonly encryptionPrivateKeyPem: string;
  /** Signing identity: undefined for member 0 until the node is started (it is StartedNode.member). */
  identity: (ClientIdentity & { id: string }) | undefined;
}

/**
 * Writes members 1..count-1 (certificates, keys) and every member's encryption key into `dir`, and
 * returns them with the `command.start` patch that makes them the service's members (member 0's
 * certificate is the one prepareStartNode writes there).
 */
export async function prepareRecoveryMembers(dir: string, count: number, threshold: number): Promise<{ members: RecoveryMember[]; startPatch: Record<string, unknown> }> {
  mkdirSync(dir, { recursive: true });
  const members: RecoveryMember[] = [];
  for (let i = 0; i < count; i++) {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const encryptionPublicKeyFile = `member${i}_enc_pub.pem`;
    writeFileSync(join(dir, encryptionPublicKeyFile), rsa.publicKey.export({ type: 'spki', format: 'pem' }) as string);
    let identity: RecoveryMember['identity'];
    if (i > 0) {
      const generated = await generateIdentity({ commonName: `member${i}` });
      writeFileSync(join(dir, `member${i}_cert.pem`), generated.certificatePem);
      identity = { certificatePem: generated.certificatePem, privateKeyPem: generated.privateKeyPem, id: certificateId(generated.certificatePem) };
    }
    members.push({
      index: i,
      certificateFile: `member${i}_cert.pem`,
      encryptionPublicKeyFile,
      encryptionPrivateKeyPem: rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
      identity,
    });
  }
  const startPatch = {
    members: members.map((m) => ({ certificate_file: m.certificateFile, encryption_public_key_file: m.encryptionPublicKeyFile })),
    service_configuration: { recovery_threshold: threshold },
  };
  return { members, startPatch };
}

/** A member's connection to `node` (member 0 is the node's own test member). */
export function recoveryMemberConnection(node: Pick<StartedNode, 'address' | 'serviceCertificatePem'>, member: RecoveryMember): MemberConnection {
  const identity = member.identity;
  if (identity === undefined) throw new Error(`member ${member.index} has no signing identity yet`);
  return { address: node.address, caPem: node.serviceCertificatePem, certificatePem: identity.certificatePem, privateKeyPem: identity.privateKeyPem, memberId: identity.id };
}

export interface RecoverNodeOptions {
  /** The old node's folder: its `ledger` and `snapshots` folders are copied (the operator keeps the originals). */
  readonly from: string;
  readonly previousServiceCertificatePem: string;
  readonly user: ClientIdentity & { id: string };
  readonly member: ClientIdentity & { id: string };
  readonly configPatch?: Record<string, unknown>;
  /** Copy the old ledger into ledger.read_only_directories instead of ledger.directory. */
  readonly readOnlyLedger?: boolean;
  readonly readyTimeoutMs?: number;
  /** Changes the copied files before the node starts (e.g. removes chunks a snapshot covers). */
  readonly prepare?: (dir: string) => void;
  /** Extra environment of the node process (e.g. COVENANT_VIRTUAL_HOST_DATA). */
  readonly env?: Record<string, string>;
  /** Wait for this state instead of PartOfPublicNetwork (e.g. a node expected to stop early: undefined waits for nothing). */
  readonly waitFor?: 'PartOfPublicNetwork' | 'exit';
}

/** Starts a recover node on copies of an old node's files; resolves once it is PartOfPublicNetwork. */
export async function startRecoverNode(options: RecoverNodeOptions): Promise<StartedNode> {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-recover-'));
  const ledgerCopy = options.readOnlyLedger ? 'old_ledger' : 'ledger';
  cpSync(join(options.from, 'ledger'), join(dir, ledgerCopy), { recursive: true });
  if (existsSync(join(options.from, 'snapshots'))) cpSync(join(options.from, 'snapshots'), join(dir, 'snapshots'), { recursive: true });
  writeFileSync(join(dir, 'previous_service_cert.pem'), options.previousServiceCertificatePem);
  options.prepare?.(dir);
  const config = {
    command: {
      type: 'Recover',
      service_certificate_file: 'service_cert.pem',
      recover: { initial_service_certificate_validity_days: 2, previous_service_identity_file: 'previous_service_cert.pem' },
    },
    node_certificate: { subject_alt_names: ['iPAddress:127.0.0.1'] },
    node_certificate_file: 'node_cert.pem',
    rpc_interfaces: { primary: { bind_address: '127.0.0.1:0', enabled_operator_features: ['LedgerChunkRead', 'SnapshotRead', 'SnapshotCreate'] } },
    node_to_node_interface: { bind_address: '127.0.0.1:0' },
    ledger: { directory: 'ledger', ...(options.readOnlyLedger ? { read_only_directories: ['old_ledger'] } : {}) },
    snapshots: { directory: 'snapshots' },
    output_files: { rpc_addresses_file: 'rpc_addresses.json' },
    ...(options.configPatch ?? {}),
  };
  const configPath = join(dir, 'node.json');
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  const spawned = spawnNode(configPath, dir, options.env);
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  const certFile = join(dir, 'service_cert.pem');
  for (;;) {
    if (options.waitFor === 'exit' && spawned.process.exitCode !== null) {
      return startedNode({ dir, configPath, address: '127.0.0.1:0', serviceCertificatePem: '', spawned, user: options.user, member: options.member });
    }
    if (spawned.process.exitCode !== null) throw new Error(`the recover node exited with ${spawned.process.exitCode}:\n${spawned.output()}`);
    if (Date.now() > deadline) {
      spawned.process.kill('SIGKILL');
      throw new Error(`the recover node did not reach PartOfPublicNetwork:\n${spawned.output()}`);
    }
    const addressesFile = join(dir, 'rpc_addresses.json');
    if (existsSync(addressesFile) && existsSync(certFile)) {
      const address = Object.values(JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>)[0]!;
      const serviceCertificatePem = readFileSync(certFile, 'utf8');
      const client = new HttpsClient(address, serviceCertificatePem);
      const state = await client.request('GET', '/node/state', { timeoutMs: 2000 }).catch(() => undefined);
      if (state?.status === 200 && state.body.state === 'PartOfPublicNetwork') {
        return startedNode({ dir, configPath, address, serviceCertificatePem, spawned, user: options.user, member: options.member, client });
      }
      client.close();
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function removeRecoverDir(node: StartedNode): void {
  rmSync(node.dir, { recursive: true, force: true });
}

/**
 * Members open a recovering service (member 0 proposes transition_service_to_open with both
 * identities and votes) and submit the shares of `sharers`; resolves once it is Open.
 */
export async function openRecoveredService(node: StartedNode, previousServiceCertificatePem: string, sharers: readonly RecoveryMember[]): Promise<void> {
  const m0: MemberConnection = { address: node.address, caPem: node.serviceCertificatePem, certificatePem: node.member.certificatePem, privateKeyPem: node.member.privateKeyPem, memberId: node.member.id };
  const action = { name: 'transition_service_to_open', args: { previous_service_identity: previousServiceCertificatePem, next_service_identity: node.serviceCertificatePem } };
  await passProposal(m0, [action], 'the proposal to open the recovered service', (note) => process.stderr.write(`${note}\n`));
  for (const member of sharers) await submitRecoveryShare(recoveryMemberConnection(node, member), member.encryptionPrivateKeyPem);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const network = await node.client.request('GET', '/node/network');
    if (network.body.service_status === 'Open') return;
    if (Date.now() > deadline) throw new Error(`the recovered service did not open:\n${node.output().slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
