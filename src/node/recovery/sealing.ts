/**
 * Sealing-based recovery on the node's side (docs/sealing.md, spec "Local sealing"):
 *
 * - a node with sealing_recovery configured makes an RSA recovery key pair when it starts the
 *   service or joins one, seals the private key under its sealing key (derived from the virtual
 *   CPU key, its measurement, host data and TCB version) bound to its location name, and the
 *   service records both in Tables.sealedRecoveryKeys (`makeSealedRecoveryKey`);
 * - the primary keeps an issue of sealed shares in step with the trusted nodes' recovery keys and
 *   the latest ledger secret (`sealedShares`, an IssueKind of the share issuer): a fresh wrapping
 *   key wraps the latest secret, and is encrypted to each node's recovery key;
 * - a recovering node on the same virtual CPU, measurement and host data re-derives its sealing
 *   key, unseals its private key, decrypts its wrapping key and unwraps the whole chain of ledger
 *   secrets from the old ledger's public tables (`unsealLedgerSecrets`): no member share needed.
 */
import { toHex, utf8 } from '../../base/bytes.js';
import { errorMessage } from '../../base/errors.js';
import { sha256 } from '../../crypto/index.js';
import type { Tx } from '../../kv/index.js';
import {
  createRecoveryKeyPair,
  deriveSealingKey,
  deriveVirtualDerivedKey,
  issueSealedShares,
  recoverChainWithSealedShare,
  sealRecoveryPrivateKey,
  VIRTUAL_TCB_VERSION,
  type ChainSecret,
  type RandomBytes,
  type SealedShareRecipient,
  type SealedShares,
} from '../../recovery/index.js';
import type { NodeInit } from '../api.js';
import { SINGLETON_KEY, TableDefs, Tables, type SealedRecoveryKeyRecord, type SealedSharesRecord } from '../tables.js';
import { digestOf, serviceIssues, ShareIssuer, type IssueInputs, type IssueKind, type ShareIssuerHost } from './share-issuer.js';


/** What a node's sealing key is derived from. */
export interface SealingInputs {
  readonly cpuKey: Uint8Array;
  readonly measurement: string;
  readonly hostData: string;
  /** sealing_recovery.location.name: the binding of the sealed key record. */
  readonly locationName: string;
}

/** The sealing inputs of a node with sealing_recovery configured that can read its virtual CPU key; otherwise undefined. */
export function sealingInputsOf(init: Pick<NodeInit, 'config' | 'virtualCpuKey'>, identity: { readonly measurement: string; readonly hostData: string }): SealingInputs | undefined {
  const sealing = init.config.sealing_recovery;
  if (sealing === undefined || init.virtualCpuKey === undefined) return undefined;
  return { cpuKey: init.virtualCpuKey(), measurement: identity.measurement, hostData: identity.hostData, locationName: sealing.location.name };
}

export function sealingKeyOf(inputs: SealingInputs): Uint8Array {
  return deriveSealingKey(deriveVirtualDerivedKey({ cpuKey: inputs.cpuKey, measurement: inputs.measurement, hostData: inputs.hostData, tcbVersion: VIRTUAL_TCB_VERSION }));
}

/** A new recovery key pair, its private key sealed to this node's sealing key: the record the service keeps. */
export function makeSealedRecoveryKey(inputs: SealingInputs, randomBytes: RandomBytes): SealedRecoveryKeyRecord {
  const pair = createRecoveryKeyPair();
  const sealed = sealRecoveryPrivateKey(sealingKeyOf(inputs), pair.privateKeyPkcs8Der, inputs.locationName, randomBytes);
  return { location_name: inputs.locationName, recovery_public_key: pair.publicKeyPem, sealed_recovery_key: Buffer.from(sealed).toString('base64') };
}

export interface SealedShareInputs extends IssueInputs {
  readonly recipients: SealedShareRecipient[];
  readonly latestFromSeqno: number;
}

/** Sealed shares: the latest secret wrapped once, the wrapping key encrypted to each trusted node's recovery key. */
export function sealedShares(host: ShareIssuerHost): IssueKind<SealedShareInputs, SealedShares> {
  return {
    name: 'sealed shares',
    // The trusted nodes' recovery keys (and the latest secret: a rekey triggers the issuer).
    coveredTables: [Tables.nodesInfo, Tables.sealedRecoveryKeys, Tables.serviceInfo],
    inputsOf: (tx) => {
      const nodes = tx.table(TableDefs.nodesInfo);
      const recipients: SealedShareRecipient[] = [];
      tx.table(TableDefs.sealedRecoveryKeys).forEach((record, nodeId) => {
        if (nodes.get(nodeId)?.status === 'Trusted') recipients.push({ id: nodeId, recoveryPublicKeyPem: record.recovery_public_key });
      });
      recipients.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      const service = tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY);
      const latestFromSeqno = host.secrets.latest.fromSeqno;
      const covered = {
        nodes: recipients.map((r) => [r.id, toHex(sha256(utf8.encode(r.recoveryPublicKeyPem)))]),
        latest_from_seqno: latestFromSeqno,
        service: service?.current_service_create_txid ?? null,
      };
      const recorded = tx.table(TableDefs.sealedShares).get(SINGLETON_KEY);
      // A service without sealing-based recovery has no recovery key: nothing to issue, nothing to say.
      return { recipients, latestFromSeqno, issuedFor: digestOf(covered), recorded: recorded?.issued_for, issuing: serviceIssues(service) && recipients.length > 0 };
    },
    prepare: async (inputs) => issueSealedShares({ fromSeqno: inputs.latestFromSeqno, secret: host.secrets.latest.secret }, inputs.recipients, host.randomBytes),
    record: (tx, inputs, shares) => {
      const record: SealedSharesRecord = {
        issued_for: inputs.issuedFor,
        wrapped_latest_secret: Buffer.from(shares.wrappedLatestSecret).toString('base64'),
        latest_secret_from_seqno: inputs.latestFromSeqno,
        encrypted_wrapping_keys: Object.fromEntries([...shares.encryptedWrappingKeys].map(([id, key]) => [id, Buffer.from(key).toString('base64')])),
      };
      tx.table(TableDefs.sealedShares).put(SINGLETON_KEY, record);
    },
    describe: (inputs) => `sealed shares issued to ${inputs.recipients.length} node(s) for the ledger secret from seqno ${inputs.latestFromSeqno}`,
  };
}

export type SealedShareIssuer = ShareIssuer<SealedShareInputs, SealedShares>;

export function sealedShareIssuer(host: ShareIssuerHost): SealedShareIssuer {
  return new ShareIssuer(host, sealedShares(host));
}

export type UnsealOutcome = { readonly chain: ChainSecret[]; readonly nodeId: string } | { readonly reason: string };

/**
 * The chain of ledger secrets, oldest first, from the old service's public tables, for the node
 * whose location and sealing inputs are given; or why it cannot be had (nothing is thrown: a node
 * that cannot unseal falls back to member shares).
 */
export function unsealLedgerSecrets(tx: Tx, inputs: SealingInputs): UnsealOutcome {
  const shares = tx.table(TableDefs.sealedShares).get(SINGLETON_KEY);
  if (shares === undefined) return { reason: 'the ledger records no sealed shares (was sealing_recovery configured on the old service?)' };
  const candidates: [string, SealedRecoveryKeyRecord][] = [];
  tx.table(TableDefs.sealedRecoveryKeys).forEach((record, nodeId) => {
    if (record.location_name === inputs.locationName && shares.encrypted_wrapping_keys[nodeId] !== undefined) candidates.push([nodeId, record]);
  });
  if (candidates.length === 0) return { reason: `no node of location "${inputs.locationName}" holds a sealed share of the latest ledger secret` };
  const previousRecords: Uint8Array[] = [];
  tx.table(TableDefs.previousLedgerSecrets).forEach((b64) => void previousRecords.push(fromBase64(b64)));
  const sealingKey = sealingKeyOf(inputs);
  const failures: string[] = [];
  for (const [nodeId, record] of candidates) {
    try {
      const chain = recoverChainWithSealedShare({
        sealingKey,
        sealedPrivateKeyRecord: fromBase64(record.sealed_recovery_key),
        binding: inputs.locationName,
        encryptedWrappingKey: fromBase64(shares.encrypted_wrapping_keys[nodeId]!),
        wrappedLatestSecret: fromBase64(shares.wrapped_latest_secret),
        previousRecords,
      });
      return { chain, nodeId };
    } catch (e) {
      failures.push(`node ${nodeId.slice(0, 12)}: ${errorMessage(e)}`);
    }
  }
  return { reason: failures.join('; ') };
}

function fromBase64(b64: string): Uint8Array {
  return new Uint8Array(Buffer.from(b64, 'base64'));
}
