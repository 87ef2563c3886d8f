/**
 * Typed access to maps. The store holds keys as strings and values as bytes, so that what is
 * replicated and hashed is exactly defined; a codec is the handler's view of those bytes.
 */
import { utf8 } from '../base/index.js';
import { malformedValue } from './errors.js';
import { copyValue, utf8Value } from './value-bytes.js';

/** Encodes values to the bytes the store holds. `encode` must be deterministic. */
export interface Codec<T> {
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

/** Maps typed keys to the store's string keys. `toKey` must be deterministic and injective. */
export interface KeyCodec<K> {
  toKey(key: K): string;
  fromKey(key: string): K;
}

/**
 * UTF-8 JSON. Deterministic as long as the handler builds objects with the same property order,
 * which holds for the same code on every node.
 */
export function jsonCodec<T>(): Codec<T> {
  return {
    encode: (value: T): Uint8Array => {
      const text = JSON.stringify(value);
      if (text === undefined) throw new TypeError('value has no JSON form');
      return utf8Value(text);
    },
    decode: (bytes: Uint8Array): T => {
      try {
        return JSON.parse(utf8.decode(bytes)) as T;
      } catch (e) {
        throw malformedValue(`stored value is not JSON: ${(e as Error).message}`);
      }
    },
  };
}

export const stringCodec: Codec<string> = {
  encode: (value) => utf8Value(value),
  decode: (bytes) => utf8.decode(bytes),
};

/** Copies both ways: the store's bytes are shared between versions and must never be mutated. */
export const bytesCodec: Codec<Uint8Array> = {
  encode: (value) => copyValue(value),
  // Not bytes.slice(): on a Buffer that is a view of the same memory.
  decode: (bytes) => new Uint8Array(bytes),
};

const UINT64_MAX = (1n << 64n) - 1n;

/** An unsigned 64-bit integer as 8 little-endian bytes. */
export const uint64Codec: Codec<bigint> = {
  encode: (value) => {
    if (value < 0n || value > UINT64_MAX) throw new RangeError(`${value} is not a uint64`);
    const out = new Uint8Array(8);
    new DataView(out.buffer).setBigUint64(0, value, true);
    return out;
  },
  decode: (bytes) => {
    if (bytes.byteLength !== 8) throw malformedValue(`a uint64 value has 8 bytes, not ${bytes.byteLength}`);
    return new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  },
};

export const stringKeyCodec: KeyCodec<string> = {
  toKey: (key) => key,
  fromKey: (key) => key,
};

const HEX16 = /^[0-9a-f]{16}$/;

/**
 * An unsigned 64-bit integer key as 16 lower-case hex digits: fixed width, so the store's key
 * order (UTF-8 bytes) is numeric order.
 */
export const uint64KeyCodec: KeyCodec<bigint> = {
  toKey: (key) => {
    if (key < 0n || key > UINT64_MAX) throw new RangeError(`${key} is not a uint64`);
    return key.toString(16).padStart(16, '0');
  },
  fromKey: (key) => {
    if (!HEX16.test(key)) throw malformedValue(`"${key.slice(0, 32)}" is not a uint64 key`);
    return BigInt(`0x${key}`);
  },
};

/** A non-negative safe integer key, same form as uint64KeyCodec (so the two can share a map). */
export const uintKeyCodec: KeyCodec<number> = {
  toKey: (key) => {
    if (!Number.isSafeInteger(key) || key < 0) throw new RangeError(`${key} is not a non-negative safe integer`);
    return key.toString(16).padStart(16, '0');
  },
  fromKey: (key) => {
    if (!HEX16.test(key)) throw malformedValue(`"${key.slice(0, 32)}" is not an integer key`);
    const value = Number.parseInt(key, 16);
    if (!Number.isSafeInteger(value)) throw malformedValue(`key ${key} is above the safe integer range`);
    return value;
  },
};
