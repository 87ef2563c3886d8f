/**
 * What the view a message carries means before the message itself is handled: a newer view is
 * (mostly) adopted, and the sender of an older one is told about ours. The state machine does
 * what the verdict says.
 */
import type { NodeId, Seqno, View } from '../base/index.js';
import type { Message } from './types.js';

/** What a node knows of itself when it judges a message's view. */
export interface LocalView {
  readonly selfId: NodeId;
  readonly view: View;
  readonly lastSeqno: Seqno;
  readonly commitSeqno: Seqno;
  /** Whether this node heard from a primary within an election timeout. */
  readonly inLease: boolean;
}

export type ViewVerdict =
  /** Handle the message by its type, in the current view. */
  | { readonly action: 'handle' }
  /** Become a backup in the message's view (following primaryId, when known), then handle the message. */
  | { readonly action: 'adopt'; readonly primaryId: NodeId | undefined }
  /** Leave the message unhandled; send the reply, if any. */
  | { readonly action: 'drop'; readonly reply?: Message };

const HANDLE: ViewVerdict = { action: 'handle' };

export function judgeView(m: Message, local: LocalView): ViewVerdict {
  if (m.view > local.view) return judgeNewerView(m, local.inLease);
  if (m.view < local.view) return { action: 'drop', reply: replyToStaleView(m, local) };
  return HANDLE;
}

function judgeNewerView(m: Message, inLease: boolean): ViewVerdict {
  if (m.type === 'request-vote') {
    // A pre-vote request changes nothing here.
    if (m.preVote) return HANDLE;
    // The lease: while this node hears from a primary, an ordinary election cannot disrupt it.
    if (inLease && !m.force) return { action: 'drop' };
    return { action: 'adopt', primaryId: undefined };
  }
  // A granted pre-vote carries the view the pre-candidate would stand in, not the voter's.
  if (m.type === 'vote-response' && m.preVote && m.granted) return HANDLE;
  return { action: 'adopt', primaryId: m.type === 'append' ? m.from : undefined };
}

function replyToStaleView(m: Message, local: LocalView): Message | undefined {
  if (m.type === 'append') {
    // Tell the stale primary about the newer view so that it steps down.
    return {
      type: 'append-response',
      from: local.selfId,
      to: m.from,
      view: local.view,
      success: false,
      lastSeqno: local.lastSeqno,
      commitSeqno: local.commitSeqno,
    };
  }
  if (m.type === 'request-vote' && m.preVote) {
    return { type: 'vote-response', from: local.selfId, to: m.from, view: local.view, preVote: true, granted: false };
  }
  return undefined;
}
