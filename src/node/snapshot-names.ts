/**
 * The name of a snapshot file while it is uncommitted: `snapshot_<seqno>.v<view>.uncommitted`.
 * Its evidence seqno is not known when it is written (the primary records the evidence once its
 * own file is written, some transactions later), so it gets the committed name
 * `snapshot_<seqno>_<evidence_seqno>.committed` only when it is completed. The view tells apart
 * two snapshots at one seqno (the first rolled back by a view change, its file possibly still
 * being written).
 */
const UNCOMMITTED = /^snapshot_(0|[1-9]\d{0,15})\.v(0|[1-9]\d{0,9})\.uncommitted$/;

export function uncommittedSnapshotName(seqno: number, view: number): string {
  return `snapshot_${seqno}.v${view}.uncommitted`;
}

export function isUncommittedSnapshotName(name: string): boolean {
  return UNCOMMITTED.test(name);
}
