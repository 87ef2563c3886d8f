/**
 * The primary's side of replication: which peers it replicates to, the appends and heartbeats it
 * sends them, whether it still hears from a majority, and how far their acknowledgements let it
 * commit. Roles, the commit itself and the hand-over stay with the
 * state machine.
 */
import { assert, type NodeId, type Seqno, type View } from '../base/index.js';
import type { RaftLog } from './log.js';
import { forgetLostBatches, newProgress, takeBatch, type Progress } from './progress.js';
import { hasJointMajority, jointMatchSeqno, nodesOf } from './quorum.js';
import type { ResolvedRaftOptions } from './raft-types.js';
import type { AppendEntries, Configuration, KnownBug, Message } from './types.js';

/** What a primary replicates from, as of now. */
export interface PrimaryState {
  readonly selfId: NodeId;
  readonly view: View;
  readonly commitSeqno: Seqno;
  /** The highest linearizable read id issued, carried by every append (0: none). */
  readonly readId: number;
  readonly log: RaftLog;
  /** Its peers' progress, which sending updates (batches in flight). */
  readonly progress: Map<NodeId, Progress>;
  readonly options: Pick<ResolvedRaftOptions, 'maxInflightBatches' | 'maxBatchEntries' | 'maxBatchBytes' | 'heartbeatsBeforeRetransmit'>;
  send(message: Message): void;
}

/**
 * Replicate to every node of an active configuration, and to retiring nodes until they know
 * that the record of their retirement is committed. (A primary elected after that record
 * committed does not go looking for them: they may well be shut down already.)
 * True when a peer was added: it awaits its first batches.
 */
export function syncPeers(s: PrimaryState, configs: readonly Configuration[]): boolean {
  const peers = new Set(nodesOf(configs));
  for (const id of s.log.removals().keys()) {
    const recordedAt = s.log.recordedAtSeqno(id);
    const known = s.progress.get(id);
    if (recordedAt === undefined || recordedAt > s.commitSeqno || (known !== undefined && known.commit < recordedAt)) peers.add(id);
  }
  peers.delete(s.selfId);
  for (const id of s.progress.keys()) if (!peers.has(id)) s.progress.delete(id);
  let added = false;
  for (const id of peers) {
    if (!s.progress.has(id)) {
      s.progress.set(id, newProgress(s.log.lastSeqno));
      added = true;
    }
  }
  return added;
}

/** CheckQuorum: whether a majority of each configuration was heard from since the last check. */
export function checkQuorum(s: PrimaryState, configs: readonly Configuration[]): boolean {
  const active = hasJointMajority(configs, (id) => id === s.selfId || s.progress.get(id)?.recentActive === true);
  for (const p of s.progress.values()) p.recentActive = false;
  return active;
}

export function heartbeat(s: PrimaryState): void {
  for (const [id, p] of s.progress) {
    forgetLostBatches(p, s.log, s.options.heartbeatsBeforeRetransmit);
    // Always a heartbeat, even when batches fill the pipeline: it keeps the peer's election
    // timer at bay and its answer counts for CheckQuorum, however slow the batches are.
    sendHeartbeat(s, id, p);
    fillPipeline(s, id, p);
  }
}

export function sendHeartbeat(s: PrimaryState, id: NodeId, p: Progress): void {
  if (p.match < s.log.startSeqno) {
    // Nothing known to match yet within this log: probe instead.
    sendAppend(s, id);
    return;
  }
  // Anchored at the known match, so that a heartbeat never disturbs pipelined batches.
  const prevView = s.log.viewAt(p.match);
  assert(prevView !== undefined, 'the match of a peer is within the primary log');
  s.send(withReadId({ type: 'append', from: s.selfId, to: id, view: s.view, prevSeqno: p.match, prevView, commitSeqno: s.commitSeqno, entries: [] }, s.readId));
}

export function fillPipeline(s: PrimaryState, id: NodeId, p: Progress): void {
  if (p.next > s.log.lastSeqno) return;
  for (let i = 0; i < s.options.maxInflightBatches && p.next <= s.log.lastSeqno; i++) if (!sendAppend(s, id)) return;
}

/** Sends the next batch to a peer (an empty probe when it is up to date). False when nothing could be sent. */
export function sendAppend(s: PrimaryState, id: NodeId): boolean {
  const p = s.progress.get(id);
  assert(p !== undefined, 'appends go to known peers');
  if (p.inflight.length >= s.options.maxInflightBatches) return false;
  const batch = takeBatch(id, p, s.log, s.options.maxBatchEntries, s.options.maxBatchBytes);
  if (batch === undefined) return false;
  const { prevSeqno, prevView, entries } = batch;
  s.send(withReadId({ type: 'append', from: s.selfId, to: id, view: s.view, prevSeqno, prevView, commitSeqno: s.commitSeqno, entries }, s.readId));
  return true;
}

/** An append with the read id when there is one (a cluster that never reads sends the same bytes as before reads existed). */
function withReadId(m: AppendEntries, readId: number): AppendEntries {
  return readId > 0 ? { ...m, readId } : m;
}

/** After every heartbeat round a read asked for: one heartbeat to each peer, carrying the newest read id. */
export function readRound(s: PrimaryState): void {
  for (const [id, p] of s.progress) sendHeartbeat(s, id, p);
}

/** The seqno the primary may commit up to now, beyond its commit; undefined when there is none. */
export function commitTarget(s: PrimaryState, configs: readonly Configuration[], bugs: ReadonlySet<KnownBug>): Seqno | undefined {
  // Its own copy counts once durable (at once when the caller does not await durability).
  const matchOf = (id: NodeId): Seqno => (id === s.selfId ? s.log.durableSeqno : (s.progress.get(id)?.match ?? 0));
  const held = bugs.has('commit-without-quorum') ? s.log.durableSeqno : jointMatchSeqno(configs, matchOf);
  if (bugs.has('commit-unsigned')) {
    const target = Math.min(held, s.log.lastSeqno);
    return target > s.commitSeqno && s.log.viewAt(target) === s.view ? target : undefined;
  }
  for (const seqno of s.log.signaturesDescending(s.commitSeqno)) {
    if (seqno > held) continue;
    // Only an entry of the current view commits by counting; older ones commit under it.
    return s.log.viewAt(seqno) === s.view ? seqno : undefined;
  }
  return undefined;
}
