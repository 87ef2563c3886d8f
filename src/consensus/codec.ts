/**
 * Binary form of consensus messages, for the node-to-node channel. Little-endian throughout:
 *
 *   message  = u8 version(=1) | u8 type | str from | str to | u53 view | body
 *   append          = u53 prevSeqno | u53 prevView | u53 commitSeqno | u32 count | entry*count | [u53 readId]
 *   append-response = u8 success(0|1) | u53 lastSeqno | u53 commitSeqno | [u53 readId]
 *   request-vote    = u8 flags(bit0 preVote, bit1 force) | u53 lastSignatureView | u53 lastSignatureSeqno
 *   vote-response   = u8 flags(bit0 preVote, bit1 granted)
 *   propose-vote    = (empty)
 *   entry    = u53 view | u53 seqno | u8 kind(0 normal, 1 signature, 2 reconfiguration)
 *              | u8 flags(bit0 configuration, bit1 retiredCommitted, bit2 sidecar)
 *              | [u53 configSeqno | u16 n | str*n] | [u16 n | str*n] | u32 length | bytes
 *              | [u32 sidecar length | sidecar bytes]
 *   str      = u16 length | UTF-8 bytes;   u53 = u32 low | u32 high (high < 2^21)
 *
 * The read id (linearizable reads, read-index.ts) is written only when above 0, so that a cluster
 * that never reads exchanges the same bytes as nodes built before reads existed; a decoder takes
 * exactly 8 bytes left at the end of those two messages as the read id.
 *
 * Decoding checks every bound and the message's own consistency and throws ConsensusMessageError
 * (never anything else) on garbage: a bad peer must not crash a node.
 */
import type { NodeId } from '../base/index.js';
import { ConsensusMessageError } from './errors.js';
import type { Configuration, Entry, EntryKind, Message, MessageType } from './types.js';

const VERSION = 1;
const MAX_STRING_BYTES = 1024;
const MAX_NODES = 1024;
const MAX_ENTRIES = 1_000_000;

const TYPE_CODES: Record<MessageType, number> = {
  append: 1,
  'append-response': 2,
  'request-vote': 3,
  'vote-response': 4,
  'propose-vote': 5,
};
const TYPES_BY_CODE = new Map(Object.entries(TYPE_CODES).map(([t, c]) => [c, t as MessageType]));
const KIND_CODES: Record<EntryKind, number> = { normal: 0, signature: 1, reconfiguration: 2 };
const KINDS_BY_CODE: readonly EntryKind[] = ['normal', 'signature', 'reconfiguration'];

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder('utf-8', { fatal: true });

class Writer {
  private buffer: Uint8Array;
  private view: DataView;
  private length = 0;

  /** `capacity`: the expected size, so that a message is written into one allocation. */
  constructor(capacity = 256) {
    this.buffer = new Uint8Array(capacity);
    this.view = new DataView(this.buffer.buffer);
  }

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    let size = this.buffer.length * 2;
    while (size < this.length + bytes) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buffer.subarray(0, this.length));
    this.buffer = next;
    this.view = new DataView(next.buffer);
  }

  u8(v: number): void {
    this.reserve(1);
    this.view.setUint8(this.length, v);
    this.length += 1;
  }

  u16(v: number): void {
    if (!Number.isInteger(v) || v < 0 || v > 0xffff) throw new RangeError(`${v} does not fit in u16`);
    this.reserve(2);
    this.view.setUint16(this.length, v, true);
    this.length += 2;
  }

  u32(v: number): void {
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`${v} does not fit in u32`);
    this.reserve(4);
    this.view.setUint32(this.length, v, true);
    this.length += 4;
  }

  u53(v: number): void {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${v} is not a non-negative safe integer`);
    this.u32(v % 0x1_0000_0000);
    this.u32(Math.floor(v / 0x1_0000_0000));
  }

  str(s: string): void {
    const bytes = textEncoder.encode(s);
    if (bytes.length > MAX_STRING_BYTES) throw new RangeError(`string of ${bytes.length} bytes is too long`);
    this.u16(bytes.length);
    this.raw(bytes);
  }

  raw(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.buffer.set(bytes, this.length);
    this.length += bytes.length;
  }

  /** The bytes written: a view of the buffer, not a copy (nothing writes to it afterwards). */
  finish(): Uint8Array {
    return this.buffer.subarray(0, this.length);
  }
}

class Reader {
  private offset = 0;
  private readonly view: DataView;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  private need(n: number, what: string): void {
    if (this.offset + n > this.bytes.length) throw new ConsensusMessageError(`truncated (${what})`);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.offset++);
  }

  u16(what: string): number {
    this.need(2, what);
    const v = this.view.getUint16(this.offset, true);
    this.offset += 2;
    return v;
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.offset, true);
    this.offset += 4;
    return v;
  }

  u53(what: string): number {
    const low = this.u32(what);
    const high = this.u32(what);
    if (high >= 1 << 21) throw new ConsensusMessageError(`${what} is beyond 2^53`);
    return high * 0x1_0000_0000 + low;
  }

  str(what: string): string {
    const length = this.u16(what);
    if (length > MAX_STRING_BYTES) throw new ConsensusMessageError(`${what} is too long`);
    this.need(length, what);
    const slice = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    try {
      return textDecoder.decode(slice);
    } catch (e) {
      throw new ConsensusMessageError(`${what} is not UTF-8 (${String(e)})`);
    }
  }

  /**
   * A view, not a copy: an entry's bytes stay in the received message (which nothing writes to
   * again) for as long as the entry lives, instead of costing one allocation each.
   */
  raw(length: number, what: string): Uint8Array {
    this.need(length, what);
    const out = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return out;
  }

  get remaining(): number {
    return this.bytes.length - this.offset;
  }
}

/** At least the encoded size of an append message (UTF-8 takes at most 3 bytes per UTF-16 unit). */
function appendSizeBound(m: Extract<Message, { type: 'append' }>): number {
  let size = 64 + 3 * (m.from.length + m.to.length);
  const nodesBound = (nodes: readonly NodeId[]) => {
    let n = 2;
    for (const id of nodes) n += 2 + 3 * id.length;
    return n;
  };
  for (const e of m.entries) {
    size += 24 + e.bytes.length + (e.sidecar !== undefined ? 4 + e.sidecar.length : 0);
    if (e.configuration !== undefined) size += 8 + nodesBound(e.configuration.nodes);
    if (e.retiredCommitted !== undefined) size += nodesBound(e.retiredCommitted);
  }
  return size;
}

function writeNodes(w: Writer, nodes: readonly NodeId[]): void {
  if (nodes.length > MAX_NODES) throw new RangeError(`${nodes.length} nodes is too many`);
  w.u16(nodes.length);
  for (const id of nodes) w.str(id);
}

function readNodes(r: Reader, what: string): NodeId[] {
  const n = r.u16(what);
  if (n > MAX_NODES) throw new ConsensusMessageError(`${what}: too many nodes`);
  const nodes: NodeId[] = [];
  for (let i = 0; i < n; i++) nodes.push(r.str(what));
  if (new Set(nodes).size !== nodes.length) throw new ConsensusMessageError(`${what}: duplicate nodes`);
  return nodes;
}

function writeEntry(w: Writer, e: Entry): void {
  w.u53(e.view);
  w.u53(e.seqno);
  w.u8(KIND_CODES[e.kind]);
  w.u8((e.configuration !== undefined ? 1 : 0) | (e.retiredCommitted !== undefined ? 2 : 0) | (e.sidecar !== undefined ? 4 : 0));
  if (e.configuration !== undefined) {
    w.u53(e.configuration.seqno);
    writeNodes(w, e.configuration.nodes);
  }
  if (e.retiredCommitted !== undefined) writeNodes(w, e.retiredCommitted);
  w.u32(e.bytes.length);
  w.raw(e.bytes);
  if (e.sidecar !== undefined) {
    w.u32(e.sidecar.length);
    w.raw(e.sidecar);
  }
}

function readEntry(r: Reader): Entry {
  const view = r.u53('entry view');
  const seqno = r.u53('entry seqno');
  const kind = KINDS_BY_CODE[r.u8('entry kind')];
  if (kind === undefined) throw new ConsensusMessageError('unknown entry kind');
  const flags = r.u8('entry flags');
  if (flags > 7) throw new ConsensusMessageError('unknown entry flags');
  let configuration: Configuration | undefined;
  if (flags & 1) {
    const configSeqno = r.u53('configuration seqno');
    const nodes = readNodes(r, 'configuration');
    if (nodes.length === 0) throw new ConsensusMessageError('empty configuration');
    if (configSeqno !== seqno) throw new ConsensusMessageError('configuration seqno differs from its entry');
    configuration = { seqno: configSeqno, nodes };
  }
  if ((kind === 'reconfiguration') !== (configuration !== undefined)) {
    throw new ConsensusMessageError('a configuration comes with, and only with, a reconfiguration entry');
  }
  const retiredCommitted = flags & 2 ? readNodes(r, 'retired nodes') : undefined;
  const length = r.u32('entry length');
  const bytes = r.raw(length, 'entry bytes');
  const entry: { -readonly [K in keyof Entry]: Entry[K] } = { view, seqno, kind, bytes };
  if (configuration !== undefined) entry.configuration = configuration;
  if (retiredCommitted !== undefined) entry.retiredCommitted = retiredCommitted;
  if (flags & 4) entry.sidecar = r.raw(r.u32('sidecar length'), 'sidecar bytes');
  return entry;
}

/** The optional trailing read id: exactly 8 bytes left, above 0 (otherwise nothing is read and the trailing-bytes check refuses). */
function readIdOf(r: Reader): { readId?: number } {
  if (r.remaining !== 8) return {};
  const readId = r.u53('readId');
  if (readId === 0) throw new ConsensusMessageError('a read id is above 0 when present');
  return { readId };
}

export function encodeMessage(m: Message): Uint8Array {
  const w = new Writer(m.type === 'append' ? appendSizeBound(m) : 256);
  w.u8(VERSION);
  w.u8(TYPE_CODES[m.type]);
  w.str(m.from);
  w.str(m.to);
  w.u53(m.view);
  switch (m.type) {
    case 'append':
      w.u53(m.prevSeqno);
      w.u53(m.prevView);
      w.u53(m.commitSeqno);
      w.u32(m.entries.length);
      for (const e of m.entries) writeEntry(w, e);
      if (m.readId !== undefined && m.readId > 0) w.u53(m.readId);
      break;
    case 'append-response':
      w.u8(m.success ? 1 : 0);
      w.u53(m.lastSeqno);
      w.u53(m.commitSeqno);
      if (m.readId !== undefined && m.readId > 0) w.u53(m.readId);
      break;
    case 'request-vote':
      w.u8((m.preVote ? 1 : 0) | (m.force ? 2 : 0));
      w.u53(m.lastSignatureView);
      w.u53(m.lastSignatureSeqno);
      break;
    case 'vote-response':
      w.u8((m.preVote ? 1 : 0) | (m.granted ? 2 : 0));
      break;
    case 'propose-vote':
      break;
  }
  return w.finish();
}

export function decodeMessage(bytes: Uint8Array): Message {
  const r = new Reader(bytes);
  const version = r.u8('version');
  if (version !== VERSION) throw new ConsensusMessageError(`unknown version ${version}`);
  const type = TYPES_BY_CODE.get(r.u8('type'));
  if (type === undefined) throw new ConsensusMessageError('unknown message type');
  const from = r.str('from');
  const to = r.str('to');
  const view = r.u53('view');
  let message: Message;
  switch (type) {
    case 'append': {
      const prevSeqno = r.u53('prevSeqno');
      const prevView = r.u53('prevView');
      const commitSeqno = r.u53('commitSeqno');
      const count = r.u32('entry count');
      // Every entry takes at least 22 bytes: a count beyond what remains is a lie.
      if (count > MAX_ENTRIES || count * 22 > r.remaining) throw new ConsensusMessageError('entry count beyond the message');
      const entries: Entry[] = [];
      let expected = prevSeqno + 1;
      let lastView = prevView;
      for (let i = 0; i < count; i++) {
        const e = readEntry(r);
        if (e.seqno !== expected) throw new ConsensusMessageError('entries are not contiguous');
        if (e.view < lastView || e.view > view) throw new ConsensusMessageError('entry views out of order');
        expected++;
        lastView = e.view;
        entries.push(e);
      }
      if (prevView > view) throw new ConsensusMessageError('prevView beyond the view');
      message = { type, from, to, view, prevSeqno, prevView, commitSeqno, entries, ...readIdOf(r) };
      break;
    }
    case 'append-response': {
      const success = r.u8('success');
      if (success > 1) throw new ConsensusMessageError('success is not a boolean');
      const lastSeqno = r.u53('lastSeqno');
      const commitSeqno = r.u53('commitSeqno');
      message = { type, from, to, view, success: success === 1, lastSeqno, commitSeqno, ...readIdOf(r) };
      break;
    }
    case 'request-vote': {
      const flags = r.u8('flags');
      if (flags > 3) throw new ConsensusMessageError('unknown vote request flags');
      const lastSignatureView = r.u53('lastSignatureView');
      const lastSignatureSeqno = r.u53('lastSignatureSeqno');
      message = { type, from, to, view, preVote: (flags & 1) !== 0, force: (flags & 2) !== 0, lastSignatureView, lastSignatureSeqno };
      break;
    }
    case 'vote-response': {
      const flags = r.u8('flags');
      if (flags > 3) throw new ConsensusMessageError('unknown vote response flags');
      message = { type, from, to, view, preVote: (flags & 1) !== 0, granted: (flags & 2) !== 0 };
      break;
    }
    case 'propose-vote':
      message = { type, from, to, view };
      break;
  }
  if (r.remaining !== 0) throw new ConsensusMessageError(`${r.remaining} trailing bytes`);
  return message;
}
