/**
 * Transactions on the node's store (docs/architecture.md, decision 2): a write runs `fn` as one
 * KV transaction, synchronously (no await between its first read and its commit), on the primary
 * only, and hands what it wrote to the proposer; if `fn` throws, nothing is written. A transaction
 * that changes the set of trusted nodes records the new configuration (one-transaction
 * reconfiguration) and is signed at once.
 */
import type { TxId } from '../../base/ids.js';
import type { MapReader, TableDef, Tx } from '../../kv/index.js';
import type { Configuration, Raft } from '../../consensus/index.js';
import { notPrimary } from '../errors.js';
import type { Replica } from '../replica.js';
import { SINGLETON_KEY, TableDefs, Tables, type NodeInfo } from '../tables.js';
import type { Proposer } from './proposer.js';
import type { Signatures } from './signatures.js';

export interface WriteResult<T> {
  readonly result: T;
  /** Undefined when the transaction wrote nothing. */
  readonly txId: TxId | undefined;
}

export interface WriteOptions {
  /**
   * The transaction's claims digest (32 bytes), bound into its Merkle leaf so that its receipt
   * proves it (a registered statement's digest). Default: no claims (32 zero bytes).
   */
  readonly claimsDigest?: Uint8Array;
}

export interface TransactionsHost {
  readonly replica: Replica;
  readonly proposer: Proposer;
  readonly signatures: Signatures;
  raft(): Raft | undefined;
  isPrimary(): boolean;
  /** The lifecycle state, for the NotPrimary message. */
  stateName(): string;
}


/** The trusted nodes of the node table, sorted: the configuration they make. */
function trustedSet(reader: { table(def: TableDef<NodeInfo>): MapReader<string, NodeInfo> }): string[] {
  const ids: string[] = [];
  reader.table(TableDefs.nodesInfo).forEach((info, id) => {
    if (info.status === 'Trusted') ids.push(id);
  });
  return ids.sort();
}

function sameNodes(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export class Transactions {
  constructor(private readonly host: TransactionsHost) {}

  /**
   * Executes `fn` as one KV transaction, synchronously. If fn throws, nothing is written. Returns
   * the transaction id when something was written.
   */
  executeWrite<T>(fn: (tx: Tx) => T, options?: WriteOptions): WriteResult<T> {
    if (!this.host.isPrimary()) throw notPrimary(`node is ${this.host.stateName()} and not the primary: writes go to the primary`);
    const { replica, proposer, signatures } = this.host;
    const tx = replica.store.beginTx();
    const result = fn(tx);
    if (tx.wroteTo(Tables.nodesInfo)) this.recordConfigurationChange(tx);
    const committed = tx.apply();
    if (committed === undefined) return { result, txId: undefined };
    const txId = proposer.propose(committed.version, committed.writeSet, 0, undefined, options?.claimsDigest);
    // A membership change commits only through a signature; until it does, elections need the
    // old configurations too. Sign at once so that the new configuration takes over quickly.
    if (committed.writeSet.has(Tables.configurations)) {
      signatures.countUnsigned();
      signatures.emit();
    } else {
      signatures.afterWrite();
    }
    return { result, txId };
  }

  /** Runs a read-only function over the current state. */
  executeRead<T>(fn: (tx: Tx) => T): T {
    return fn(this.host.replica.store.beginTx());
  }

  /**
   * A transaction that changes the set of trusted nodes is a reconfiguration: it records the new
   * configuration so that the entry carries it on any node, and from the ledger alone.
   */
  private recordConfigurationChange(tx: Tx): void {
    const nodes = trustedSet(tx);
    const active = this.host.raft()?.status().configs.at(-1)?.nodes ?? [];
    if (sameNodes(nodes, [...active].sort())) return;
    const configuration: Configuration = { seqno: this.host.replica.store.version + 1, nodes };
    tx.table(TableDefs.configurations).put(SINGLETON_KEY, configuration);
  }

  /** Marks nodes whose retirement committed (consensus reports them to the primary). */
  recordRetirements(nodeIds: readonly string[]): void {
    const tx = this.host.replica.store.beginTx();
    const nodes = tx.table(TableDefs.nodesInfo);
    for (const id of nodeIds) {
      const info = nodes.get(id);
      if (info) nodes.put(id, { ...info, retired_committed: true });
    }
    const committed = tx.apply();
    if (!committed) return;
    this.host.proposer.propose(committed.version, committed.writeSet, 0, [...nodeIds]);
    this.host.signatures.afterWrite();
  }
}
