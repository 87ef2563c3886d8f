/**
 * What a new service's first transaction records (command.type Start): the service record, its
 * configuration, the first node (trusted, with its endorsed certificate and the code it runs),
 * the members and users of command.start, and the constitution. Every file it needs is read and
 * checked before anything is written (checkStartInputs), so a bad one stops the node with the
 * configuration key named and leaves no output files.
 */
import { assert } from '../../base/assert.js';
import { errorMessage } from '../../base/errors.js';
import { certificateId, loadPublicKey } from '../../crypto/index.js';
import type { Tx } from '../../kv/index.js';
import type { NodeConfig } from '../../config/index.js';
import { nodeError } from '../errors.js';
import type { NodeIdentity } from '../identity/node-identity.js';
import { SINGLETON_KEY, TableDefs, type MemberInfo, type NodeInfo, type SealedRecoveryKeyRecord, type ServiceInfo } from '../tables.js';
import { makeSealedRecoveryKey } from '../recovery/sealing.js';
import type { FlowContext } from './context.js';

export interface GenesisInputs {
  readonly config: NodeConfig;
  readTextFile(path: string): string;
}

function readJsonFile(inputs: GenesisInputs, path: string | undefined): unknown {
  if (path === undefined) return null;
  return JSON.parse(inputs.readTextFile(path)) as unknown;
}

/** The constitution genesis records: the command.start.constitution_files, in order, as one module. */
export function startConstitution(inputs: GenesisInputs): string {
  return (inputs.config.command.start?.constitution_files ?? []).map((f) => inputs.readTextFile(f)).join('\n');
}

/** Reads and parses every file genesis will use, as it will use it: a bad one is found before anything is written. */
export function checkStartInputs(inputs: GenesisInputs): void {
  const start = inputs.config.command.start;
  assert(start, 'Start configuration is present');
  const files: [string, string | undefined, (text: string) => void][] = [];
  const asJson = (text: string) => void JSON.parse(text);
  const asCertificate = (text: string) => void certificateId(text);
  const asPublicKey = (text: string) => void loadPublicKey(text);
  const asText = () => undefined;
  start.members.forEach((m, i) => {
    files.push([`command.start.members[${i}].certificate_file`, m.certificate_file, asCertificate]);
    files.push([`command.start.members[${i}].encryption_public_key_file`, m.encryption_public_key_file, asPublicKey]);
    files.push([`command.start.members[${i}].data_json_file`, m.data_json_file, asJson]);
  });
  (start.users ?? []).forEach((u, i) => {
    files.push([`command.start.users[${i}].certificate_file`, u.certificate_file, asCertificate]);
    files.push([`command.start.users[${i}].data_json_file`, u.data_json_file, asJson]);
  });
  (start.constitution_files ?? []).forEach((f, i) => files.push([`command.start.constitution_files[${i}]`, f, asText]));
  for (const [key, path, check] of files) {
    if (path === undefined) continue;
    try {
      check(inputs.readTextFile(path));
    } catch (e) {
      throw nodeError('InvalidConfiguration', `"${key}": cannot use ${path}: ${errorMessage(e)}`);
    }
  }
}

export interface GenesisNode {
  readonly identity: NodeIdentity;
  readonly serviceCertificatePem: string;
  readonly rpcInterfaces: NodeInfo['rpc_interfaces'];
  readonly nodeToNode: { bind_address: string; published_address: string };
  /** The transaction id genesis will have. */
  readonly createTxId: string;
  /** This node's recovery key, with sealing_recovery configured. */
  readonly sealedRecoveryKey: SealedRecoveryKeyRecord | undefined;
}

/** A new recovery key sealed to this node, with sealing_recovery configured (docs/sealing.md); the node logs which it made. */
export function sealedRecoveryKeyOf(ctx: FlowContext): SealedRecoveryKeyRecord | undefined {
  const inputs = ctx.sealingInputs();
  if (inputs === undefined) return undefined;
  const record = makeSealedRecoveryKey(inputs, ctx.init.randomBytes);
  ctx.logger.info(`sealing: a recovery key sealed to this machine's virtual CPU key, measurement and host data, for location "${inputs.locationName}"`);
  return record;
}

/** The genesis transaction. */
export function writeGenesis(tx: Tx, inputs: GenesisInputs, node: GenesisNode): void {
  const config = inputs.config;
  const start = config.command.start;
  assert(start, 'Start configuration is present');
  const service: ServiceInfo = {
    status: 'Opening',
    cert: node.serviceCertificatePem,
    recovery_count: 0,
    service_data: config.service_data ?? null,
    current_service_create_txid: node.createTxId,
  };
  tx.table(TableDefs.serviceInfo).put(SINGLETON_KEY, service);
  tx.table(TableDefs.serviceConfig).put(SINGLETON_KEY, {
    recovery_threshold: start.service_configuration?.recovery_threshold ?? 1,
    maximum_node_certificate_validity_days: start.service_configuration?.maximum_node_certificate_validity_days ?? 365,
    maximum_service_certificate_validity_days: start.service_configuration?.maximum_service_certificate_validity_days ?? 365,
  });
  const { identity } = node;
  const nodeInfo: NodeInfo = {
    status: 'Trusted',
    public_key: identity.publicKeyPem,
    node_data: config.node_data ?? null,
    rpc_interfaces: node.rpcInterfaces,
    node_to_node_interface: node.nodeToNode,
    quote_info: identity.quoteInfo!,
    retired_committed: false,
  };
  tx.table(TableDefs.nodesInfo).put(identity.nodeId, nodeInfo);
  if (node.sealedRecoveryKey !== undefined) tx.table(TableDefs.sealedRecoveryKeys).put(identity.nodeId, node.sealedRecoveryKey);
  tx.table(TableDefs.nodesEndorsedCertificates).put(identity.nodeId, identity.nodeCertificatePem);
  tx.table(TableDefs.hostData).put(identity.hostData, { measurement: identity.measurement });
  tx.table(TableDefs.virtualMeasurements).put(identity.measurement, {});
  for (const member of start.members) {
    const pem = inputs.readTextFile(member.certificate_file);
    const id = certificateId(pem);
    tx.table(TableDefs.membersCerts).put(id, pem);
    const info: MemberInfo = { status: 'Accepted', member_data: readJsonFile(inputs, member.data_json_file) };
    tx.table(TableDefs.membersInfo).put(id, info);
    if (member.encryption_public_key_file) {
      tx.table(TableDefs.membersEncryptionPublicKeys).put(id, inputs.readTextFile(member.encryption_public_key_file));
    }
  }
  for (const user of start.users ?? []) {
    const pem = inputs.readTextFile(user.certificate_file);
    const id = certificateId(pem);
    tx.table(TableDefs.usersCerts).put(id, pem);
    tx.table(TableDefs.usersInfo).put(id, { user_data: readJsonFile(inputs, user.data_json_file) });
  }
  const constitution = startConstitution(inputs);
  if (constitution.length > 0) tx.table(TableDefs.constitution).put(SINGLETON_KEY, constitution);
}
