/**
 * The primary's view of each peer's replication: what matches, what to send next, the batches
 * in flight, and the choice of the batches themselves. Sending stays with the state machine.
 */
import { assert, type NodeId, type Seqno, type View } from '../base/index.js';
import type { RaftLog } from './log.js';
import type { Entry, PeerStatus } from './types.js';

export interface Progress {
  match: Seqno;
  next: Seqno;
  /** Last seqno of each unacknowledged batch. */
  inflight: Seqno[];
  heartbeatsSinceAck: number;
  recentActive: boolean;
  /** The peer's commit seqno as of its last answer. */
  commit: Seqno;
  needsSnapshot: boolean;
  /** The highest linearizable read id the peer echoed in this view (read-index.ts). */
  readAck: number;
}

/** A peer just added: nothing known to match; probe from the end of the log. */
export function newProgress(lastSeqno: Seqno): Progress {
  return { match: 0, next: lastSeqno + 1, inflight: [], heartbeatsSinceAck: 0, recentActive: true, needsSnapshot: false, commit: 0, readAck: 0 };
}

/** The peer accepted a batch: everything up to lastSeqno matches. */
export function acknowledge(p: Progress, lastSeqno: Seqno, log: RaftLog): void {
  if (lastSeqno > p.match) {
    assert(lastSeqno <= log.lastSeqno, 'a peer acknowledges only what the primary sent');
    p.match = lastSeqno;
    p.heartbeatsSinceAck = 0;
    p.needsSnapshot = false;
  }
  p.inflight = p.inflight.filter((s) => s > p.match);
  // With nothing in flight, everything after the match is still to send (a probe may have
  // pushed `next` optimistically to the end of the log).
  if (p.next <= p.match || (p.inflight.length === 0 && p.match >= log.startSeqno)) p.next = p.match + 1;
}

/** The peer refused a batch, holding lastSeqno: true when the primary should send again from the new `next`. */
export function rewind(p: Progress, lastSeqno: Seqno, log: RaftLog): boolean {
  if (lastSeqno < p.match && lastSeqno >= log.startSeqno) {
    // The peer holds less than it acknowledged: a restart cut a torn tail off its ledger.
    // Resend from what it holds, or it would never be caught up in this view.
    p.match = lastSeqno;
  }
  const next = Math.max(p.match + 1, Math.min(p.next, lastSeqno + 1));
  if (next < p.next || p.inflight.length > 0) {
    p.next = next;
    p.inflight = [];
    return true;
  }
  return false;
}

/** At a heartbeat: after heartbeatsBeforeRetransmit heartbeats without an acknowledgement, batches in flight count as lost. */
export function forgetLostBatches(p: Progress, log: RaftLog, heartbeatsBeforeRetransmit: number): void {
  if (p.inflight.length > 0 && ++p.heartbeatsSinceAck >= heartbeatsBeforeRetransmit) {
    // Batches or their acknowledgements were lost: resend from the last known match (or
    // probe again from the end when nothing is known to match within this log).
    p.next = p.match >= log.startSeqno ? p.match + 1 : log.lastSeqno + 1;
    p.inflight = [];
    p.heartbeatsSinceAck = 0;
  }
}

export interface Batch {
  readonly prevSeqno: Seqno;
  readonly prevView: View;
  readonly entries: Entry[];
}

/**
 * The next batch for a peer (empty when it is up to date), recorded as in flight; undefined
 * when the log no longer holds what the peer needs (it needs a snapshot).
 */
export function takeBatch(id: NodeId, p: Progress, log: RaftLog, maxBatchEntries: number, maxBatchBytes: number): Batch | undefined {
  const prevSeqno = p.next - 1;
  if (prevSeqno < log.startSeqno) {
    p.needsSnapshot = true;
    return undefined;
  }
  const prevView = log.viewAt(prevSeqno);
  assert(prevView !== undefined, () => `next seqno ${p.next} of ${id} is within the log`);
  const entries: Entry[] = [];
  let bytes = 0;
  for (let s = p.next; s <= log.lastSeqno && entries.length < maxBatchEntries; s++) {
    const e = log.entry(s)!;
    if (entries.length > 0 && bytes + e.bytes.byteLength > maxBatchBytes) break;
    bytes += e.bytes.byteLength;
    entries.push(e);
  }
  if (entries.length > 0) {
    p.next = entries[entries.length - 1]!.seqno + 1;
    p.inflight.push(p.next - 1);
  }
  return { prevSeqno, prevView, entries };
}

/**
 * The peer of `nodes` to hand over to: the one with the highest match (the smallest id among
 * equals), with that match (-1 when there is none).
 */
export function mostUpToDate(nodes: readonly NodeId[], progress: ReadonlyMap<NodeId, Progress>, selfId: NodeId): { successor: NodeId | undefined; matchSeqno: Seqno } {
  let successor: NodeId | undefined;
  let best = -1;
  for (const id of nodes) {
    const match = progress.get(id)?.match ?? -1;
    if (id !== selfId && (match > best || (match === best && successor !== undefined && id < successor))) {
      successor = id;
      best = match;
    }
  }
  return { successor, matchSeqno: best };
}

export function peerStatuses(progress: ReadonlyMap<NodeId, Progress>): PeerStatus[] {
  const peers: PeerStatus[] = [];
  for (const [id, p] of progress) {
    peers.push({ id, matchSeqno: p.match, nextSeqno: p.next, commitSeqno: p.commit, needsSnapshot: p.needsSnapshot, recentlyActive: p.recentActive });
  }
  return peers;
}

export function peersNeedingSnapshot(progress: ReadonlyMap<NodeId, Progress>): NodeId[] {
  const ids: NodeId[] = [];
  for (const [id, p] of progress) if (p.needsSnapshot) ids.push(id);
  return ids.sort();
}
