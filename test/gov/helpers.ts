/** A governance fixture over an in-memory store: a service record, members with keys, a clock. */
import { generateIdentity, generateRsaKeyPair, type Identity } from '../../src/crypto/index.js';
import { Store, jsonCodec, type Tx } from '../../src/kv/index.js';
import { Governance, type GovRequest, GovTables, loadJsEngine, signGovRequest, type GovMessageType, type SandboxLimits } from '../../src/gov/index.js';

const json = jsonCodec<any>();

export const TEST_LIMITS: SandboxLimits = { memoryBytesMax: 16 * 1024 * 1024, executionTimeMsMax: 300, stackBytesMax: 64 * 1024 };

export interface Fixture {
  store: Store;
  gov: Governance;
  members: Identity[];
  nowMs: number;
  write<T>(fn: (tx: Tx) => T): T;
  read<T>(fn: (tx: Tx) => T): T;
  sign(member: Identity, type: GovMessageType, payload: unknown, proposalId?: string, createdAtSeconds?: number): GovRequest;
  activate(member: Identity): void;
  propose(member: Identity, actions: unknown[]): string;
  vote(member: Identity, proposalId: string, ballot: string | boolean): ReturnType<Governance['submitBallot']>['body'];
  state(proposalId: string): string;
}

export const ACCEPT = 'export function vote(proposal, proposerId) { return true }';
export const REJECT = 'export function vote(proposal, proposerId) { return false }';

export async function fixture(options: { members?: number; recoveryMembers?: number } = {}): Promise<Fixture> {
  const engine = await loadJsEngine();
  const store = new Store();
  const members = await Promise.all(Array.from({ length: options.members ?? 1 }, (_, i) => generateIdentity({ commonName: `member${i}` })));
  const serviceCert = (await generateIdentity({ commonName: 'service' })).certificatePem;
  const f: Fixture = {
    store,
    members,
    nowMs: 1_700_000_000_000,
    gov: undefined as unknown as Governance,
    write(fn) {
      const tx = store.beginTx();
      const result = fn(tx);
      tx.apply();
      return result;
    },
    read(fn) {
      return fn(store.beginTx());
    },
    sign(member, type, payload, proposalId, createdAtSeconds) {
      const body = signGovRequest({
        type,
        payload: payload === undefined ? '' : JSON.stringify(payload),
        privateKeyPem: member.privateKeyPem,
        memberId: member.id,
        createdAtSeconds: createdAtSeconds ?? Math.floor(f.nowMs / 1000),
        ...(proposalId !== undefined ? { proposalId } : {}),
      });
      return { body, contentType: 'application/cose' };
    },
    activate(member) {
      f.write((tx) => f.gov.updateStateDigest(tx, f.sign(member, 'state_digest', undefined), member.id, 'ab'.repeat(32)));
      f.write((tx) => f.gov.ackStateDigest(tx, f.sign(member, 'ack', { state_digest: 'ab'.repeat(32) }), member.id));
    },
    propose(member, actions) {
      return f.write((tx) => f.gov.createProposal(tx, f.sign(member, 'proposal', { actions }))).body.proposal_id;
    },
    vote(member, proposalId, ballot) {
      const source = ballot === true ? ACCEPT : ballot === false ? REJECT : ballot;
      return f.write((tx) => f.gov.submitBallot(tx, f.sign(member, 'ballot', { ballot: source }, proposalId), proposalId, member.id)).body;
    },
    state(proposalId) {
      return f.read((tx) => f.gov.proposal(tx, proposalId).state);
    },
  };
  f.gov = new Governance({ engine, nowMs: () => f.nowMs, sandboxLimits: TEST_LIMITS });
  const recoveryMembers = options.recoveryMembers ?? 1;
  const rsa = recoveryMembers > 0 ? generateRsaKeyPair(2048) : undefined;
  f.write((tx) => {
    tx.map(GovTables.serviceInfo, json).put('0', { status: 'Opening', cert: serviceCert, recovery_count: 0, service_data: null });
    tx.map(GovTables.serviceConfig, json).put('0', { recovery_threshold: 1, maximum_node_certificate_validity_days: 365 });
    members.forEach((m, i) => {
      tx.map(GovTables.membersCerts, json).put(m.id, m.certificatePem);
      tx.map(GovTables.membersInfo, json).put(m.id, { status: 'Accepted', member_data: null });
      if (i < recoveryMembers) tx.map(GovTables.membersEncryptionPublicKeys, json).put(m.id, rsa!.publicKeyPem);
    });
  });
  return f;
}

export function table(f: Fixture, name: string, key: string): any {
  return f.read((tx) => tx.map(name, json).get(key));
}
