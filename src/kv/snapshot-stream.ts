/**
 * A packed snapshot (snapshot-slices.ts) encoded piece by piece: the store snapshot's body — the
 * public section, then the private one enciphered — comes out in pieces of a bounded size that the
 * caller writes (and hashes) as they come, and the header, whose digest covers the body after it,
 * once the body is done. A snapshot of size S is then never held whole a second time: writing it
 * holds the packed chunks (about S, each dropped once its entries are encoded when the encoder
 * owns them) and one piece.
 *
 * Why the bytes are those of encodeSnapshot: the maps are written in the same order (ascending
 * names, public then private), each map's entries in ascending UTF-8 order of their keys, with the
 * same write-set layout; the private section is enciphered with the same key, IV and additional
 * data, and AES-GCM's ciphertext does not depend on how its input is cut. Tested against the
 * one-call encoder for many piece sizes (test/kv/snapshot-stream.test.ts).
 */
import { createHash, type Hash } from 'node:crypto';
import { assert } from '../base/index.js';
import { compareUtf8, isPublicMapName } from './key-order.js';
import { AES_GCM_TAG_BYTES, type IncrementalSealing, type LedgerEncryptor } from './encryption.js';
import { encodeSnapshotHeader, SNAPSHOT_AAD_BYTES, SNAPSHOT_HEADER_BYTES } from './snapshot.js';
import { PACKED_CHUNK_BYTES, type PackedSnapshot } from './snapshot-slices.js';
import { WRITE_SET_FORMAT } from './write-set.js';

/** Where each packed entry is: its chunk and the offset of its key length there. */
interface EntryIndex {
  readonly chunk: Uint32Array;
  readonly offset: Uint32Array;
}

interface MapLayout {
  readonly name: string;
  readonly nameBytes: Buffer;
  /** Index of its first entry in the EntryIndex. */
  readonly first: number;
  readonly count: number;
}

/** Fills pieces of a fixed capacity and hands each on once full (or at flush). */
class PieceWriter {
  readonly #piece: Buffer;
  readonly #scratch = Buffer.alloc(8);
  #used = 0;
  #seal: IncrementalSealing | undefined;
  readonly #emit: (bytes: Uint8Array) => void;

  constructor(pieceBytes: number, emit: (bytes: Uint8Array) => void) {
    this.#piece = Buffer.allocUnsafe(pieceBytes);
    this.#emit = emit;
  }

  /** From now on the pieces are enciphered before they are handed on (undefined: in clear). */
  sealWith(seal: IncrementalSealing | undefined): void {
    this.flush();
    this.#seal = seal;
  }

  copy(source: Buffer, start: number, end: number): void {
    while (start < end) {
      if (this.#used === this.#piece.byteLength) this.flush();
      const n = Math.min(end - start, this.#piece.byteLength - this.#used);
      source.copy(this.#piece, this.#used, start, start + n);
      this.#used += n;
      start += n;
    }
  }

  u8(value: number): void {
    if (this.#used === this.#piece.byteLength) this.flush();
    this.#piece[this.#used++] = value;
  }

  u32(value: number): void {
    if (this.#piece.byteLength - this.#used >= 4) {
      this.#piece.writeUInt32LE(value, this.#used);
      this.#used += 4;
      return;
    }
    this.#scratch.writeUInt32LE(value, 0);
    this.copy(this.#scratch, 0, 4);
  }

  u64(value: number): void {
    this.#scratch.writeUInt32LE(value % 0x1_0000_0000, 0);
    this.#scratch.writeUInt32LE(Math.floor(value / 0x1_0000_0000), 4);
    this.copy(this.#scratch, 0, 8);
  }

  flush(): void {
    if (this.#used === 0) return;
    const bytes = this.#piece.subarray(0, this.#used);
    this.#used = 0;
    this.#emit(this.#seal === undefined ? bytes : this.#seal.update(bytes));
  }
}

export interface SnapshotStreamOptions {
  /** Largest piece handed to the sink. */
  readonly pieceBytes: number;
  /**
   * The encoder takes the packed chunks (packed.chunks is emptied at once) and drops each once
   * every entry in it is encoded, so that their memory goes as the file is written. Otherwise
   * they stay the caller's, untouched.
   */
  readonly consumeChunks: boolean;
}

export class PackedSnapshotEncoder {
  readonly #packed: Pick<PackedSnapshot, 'version' | 'view'>;
  readonly #encryptor: LedgerEncryptor;
  readonly #options: SnapshotStreamOptions;
  readonly #chunks: (Buffer | undefined)[];
  /** Entries of each chunk not encoded yet. */
  readonly #chunkEntriesLeft: Uint32Array;
  readonly #entries: EntryIndex;
  readonly #publicMaps: MapLayout[] = [];
  readonly #privateMaps: MapLayout[] = [];
  readonly #publicBytes: number;
  readonly #privateBytes: number;
  #bodyDigest: Uint8Array | undefined;
  #started = false;

  constructor(packed: PackedSnapshot, encryptor: LedgerEncryptor, options: SnapshotStreamOptions) {
    assert(Number.isSafeInteger(options.pieceBytes) && options.pieceBytes >= 8, `bad piece size ${options.pieceBytes}`);
    this.#packed = { version: packed.version, view: packed.view };
    this.#encryptor = encryptor;
    this.#options = options;
    this.#chunks = packed.chunks.map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength));
    if (options.consumeChunks) (packed.chunks as Uint8Array[]).length = 0;
    this.#chunkEntriesLeft = new Uint32Array(this.#chunks.length);
    const total = packed.maps.reduce((sum, m) => sum + m.count, 0);
    this.#entries = { chunk: new Uint32Array(total), offset: new Uint32Array(total) };
    const sizes = this.#index(packed);
    this.#publicBytes = sizes.publicBytes;
    this.#privateBytes = sizes.privateBytes;
  }

  /** Packed chunks this encoder still refers to (fewer as it writes, when it owns them). */
  get chunksHeld(): number {
    return this.#chunks.reduce((n, c) => (c === undefined ? n : n + 1), 0);
  }

  /** The store snapshot's size: header and body. */
  get byteLength(): number {
    return SNAPSHOT_HEADER_BYTES + 16 + this.#publicBytes + this.#encryptedBytes;
  }

  get #encryptedBytes(): number {
    return this.#privateBytes === 0 ? 0 : this.#privateBytes + AES_GCM_TAG_BYTES;
  }

  /**
   * Hands the body to `sink` in order, in pieces of at most pieceBytes (each valid only during the
   * call: the next piece reuses its memory). Once only.
   */
  encodeBody(sink: (piece: Uint8Array) => void): void {
    assert(!this.#started, 'a packed snapshot is encoded once');
    this.#started = true;
    const hasher: Hash = createHash('sha256');
    const writer = new PieceWriter(this.#options.pieceBytes, (bytes) => {
      hasher.update(bytes);
      sink(bytes);
    });
    writer.u64(this.#publicBytes);
    this.#writePart(writer, this.#publicMaps);
    writer.u64(this.#encryptedBytes);
    if (this.#privateBytes > 0) {
      const aad = encodeSnapshotHeader(this.#packed.version, this.#packed.view, undefined).subarray(0, SNAPSHOT_AAD_BYTES);
      const seal = this.#encryptor.sealSnapshotIncrementally(this.#packed.view, this.#packed.version, aad);
      writer.sealWith(seal);
      this.#writePart(writer, this.#privateMaps);
      writer.sealWith(undefined);
      const tag = seal.tag();
      writer.copy(tag, 0, tag.byteLength);
    }
    writer.flush();
    this.#bodyDigest = hasher.digest();
  }

  /** The header, with the digest of the body (once encodeBody returned). */
  header(): Buffer {
    assert(this.#bodyDigest !== undefined, 'the header follows the body');
    return encodeSnapshotHeader(this.#packed.version, this.#packed.view, this.#bodyDigest);
  }

  /** Fills the entry index and the map layouts; the sections' sizes. */
  #index(packed: PackedSnapshot): { publicBytes: number; privateBytes: number } {
    let chunkIndex = -1;
    let chunk: Buffer = Buffer.alloc(0);
    let offset = 0;
    let entry = 0;
    const sizes = { publicBytes: 0, privateBytes: 0 };
    for (const { name, count } of packed.maps) {
      const first = entry;
      let mapBytes = 0;
      for (let i = 0; i < count; i++) {
        if (offset === chunk.byteLength) {
          chunkIndex++;
          assert(chunkIndex < this.#chunks.length, `packed snapshot ends inside map ${name}`);
          chunk = this.#chunks[chunkIndex]!;
          offset = 0;
        }
        assert(chunk.byteLength <= 0xffff_ffff, 'a chunk offset fits 32 bits');
        this.#entries.chunk[entry] = chunkIndex;
        this.#entries.offset[entry] = offset;
        this.#chunkEntriesLeft[chunkIndex]!++;
        entry++;
        const keyBytes = chunk.readUInt32LE(offset);
        const valueBytes = chunk.readUInt32LE(offset + 4 + keyBytes);
        const packedBytes = 8 + keyBytes + valueBytes;
        // The write-set layout adds the value tag (1 byte) to the packed layout.
        mapBytes += packedBytes + 1;
        offset += packedBytes;
      }
      if (count === 0) continue;
      const layout: MapLayout = { name, nameBytes: Buffer.from(name, 'utf8'), first, count };
      const publicMap = isPublicMapName(name);
      (publicMap ? this.#publicMaps : this.#privateMaps).push(layout);
      const bytes = 8 + layout.nameBytes.byteLength + mapBytes;
      if (publicMap) sizes.publicBytes += bytes;
      else sizes.privateBytes += bytes;
    }
    assert(offset === chunk.byteLength && chunkIndex === this.#chunks.length - 1, 'packed snapshot has bytes after its last map');
    // A part with maps has a 5-byte head (format, map count); a part without maps is empty.
    if (this.#publicMaps.length > 0) sizes.publicBytes += 5;
    if (this.#privateMaps.length > 0) sizes.privateBytes += 5;
    return sizes;
  }

  #writePart(writer: PieceWriter, maps: readonly MapLayout[]): void {
    if (maps.length === 0) return;
    writer.u8(WRITE_SET_FORMAT);
    writer.u32(maps.length);
    for (const map of maps) this.#writeMap(writer, map);
  }

  #writeMap(writer: PieceWriter, map: MapLayout): void {
    writer.u32(map.nameBytes.byteLength);
    writer.copy(map.nameBytes, 0, map.nameBytes.byteLength);
    writer.u32(map.count);
    const order = this.#sortedOrder(map);
    const { chunk: chunkOf, offset: offsetOf } = this.#entries;
    for (let i = 0; i < map.count; i++) {
      const entry = map.first + (order === undefined ? i : order[i]!);
      const chunkIndex = chunkOf[entry]!;
      const chunk = this.#chunks[chunkIndex]!;
      const offset = offsetOf[entry]!;
      const keyEnd = offset + 4 + chunk.readUInt32LE(offset);
      const valueEnd = keyEnd + 4 + chunk.readUInt32LE(keyEnd);
      // keyLength key, then the value tag, then valueLength value: the packed bytes around a tag.
      writer.copy(chunk, offset, keyEnd);
      writer.u8(1);
      writer.copy(chunk, keyEnd, valueEnd);
      if (--this.#chunkEntriesLeft[chunkIndex]! === 0 && this.#options.consumeChunks) this.#chunks[chunkIndex] = undefined;
    }
  }

  /**
   * The map's entries in ascending UTF-8 order of keys: undefined when they were packed in that
   * order already (checked on the keys' bytes, which is that order, without making strings).
   */
  #sortedOrder(map: MapLayout): Uint32Array | undefined {
    const { chunk: chunkOf, offset: offsetOf } = this.#entries;
    const keySpan = (entry: number): [Buffer, number, number] => {
      const chunk = this.#chunks[chunkOf[entry]!]!;
      const offset = offsetOf[entry]!;
      return [chunk, offset + 4, offset + 4 + chunk.readUInt32LE(offset)];
    };
    let sorted = true;
    for (let i = 1; i < map.count && sorted; i++) {
      const [a, aStart, aEnd] = keySpan(map.first + i - 1);
      const [b, bStart, bEnd] = keySpan(map.first + i);
      sorted = a.compare(b, bStart, bEnd, aStart, aEnd) < 0;
    }
    if (sorted) return undefined;
    const keys = new Array<string>(map.count);
    for (let i = 0; i < map.count; i++) {
      const [chunk, start, end] = keySpan(map.first + i);
      keys[i] = chunk.toString('utf8', start, end);
    }
    const order = new Uint32Array(map.count);
    for (let i = 0; i < map.count; i++) order[i] = i;
    return order.sort((a, b) => compareUtf8(keys[a]!, keys[b]!));
  }
}

/** The whole store snapshot of a packed state in one buffer (tests, small states): encodeSnapshot's bytes. */
export function encodePackedSnapshotStreamed(packed: PackedSnapshot, encryptor: LedgerEncryptor, pieceBytes: number): Uint8Array {
  const encoder = new PackedSnapshotEncoder(packed, encryptor, { pieceBytes, consumeChunks: false });
  const pieces: Buffer[] = [Buffer.alloc(SNAPSHOT_HEADER_BYTES)];
  encoder.encodeBody((piece) => pieces.push(Buffer.from(piece)));
  pieces[0] = encoder.header();
  const out = Buffer.concat(pieces);
  assert(out.byteLength === encoder.byteLength, 'the streamed snapshot has the size it announced');
  return out;
}

/** The snapshot bytes of a packed state: exactly those Store.serializeSnapshot gives at that version. */
export function encodePackedSnapshot(packed: PackedSnapshot, encryptor: LedgerEncryptor): Uint8Array {
  return encodePackedSnapshotStreamed(packed, encryptor, PACKED_CHUNK_BYTES);
}
