/**
 * Identifiers. Glossary: a Raft term is a *view*, a Raft log index is a *seqno* (from 1).
 * A transaction id is written `<view>.<seqno>`.
 */
export type View = number;
export type Seqno = number;
/** Lower-case hex SHA-256 of the DER SubjectPublicKeyInfo of the node's identity public key. */
export type NodeId = string;

export interface TxId {
  readonly view: View;
  readonly seqno: Seqno;
}

export function formatTxId(txId: TxId): string {
  return `${txId.view}.${txId.seqno}`;
}

/** Parses `<view>.<seqno>`; returns undefined when the text is not of that shape. */
export function parseTxId(text: string): TxId | undefined {
  const match = /^(\d{1,15})\.(\d{1,15})$/.exec(text);
  if (!match) return undefined;
  return { view: Number(match[1]), seqno: Number(match[2]) };
}
