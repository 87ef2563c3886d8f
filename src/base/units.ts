/** Parsing of configuration durations ("100ms", "2s", "30min", "1h") and sizes ("5MB", "1KB", "512"). */

const DURATION_UNITS_MS: Record<string, number> = {
  us: 0.001,
  ms: 1,
  s: 1000,
  min: 60_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** Parses a duration string into milliseconds. Throws a TypeError describing the accepted forms. */
export function parseDurationMs(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|m|h|d)\s*$/.exec(text);
  if (!match) throw new TypeError(`"${text}" is not a duration (examples: "100ms", "2s", "30min", "1h")`);
  return Number(match[1]) * DURATION_UNITS_MS[match[2]!]!;
}

const SIZE_UNITS_BYTES: Record<string, number> = {
  '': 1,
  B: 1,
  KB: 1024,
  KIB: 1024,
  MB: 1024 ** 2,
  MIB: 1024 ** 2,
  GB: 1024 ** 3,
  GIB: 1024 ** 3,
};

/** Parses a size ("5MB", "64KB", "1048576") into bytes. Units are binary (1KB = 1024 bytes), as in CCF. */
export function parseSizeBytes(text: string | number): number {
  if (typeof text === 'number') {
    if (!Number.isSafeInteger(text) || text < 0) throw new TypeError(`${text} is not a size in bytes`);
    return text;
  }
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = match?.[2]?.toUpperCase();
  if (!match || unit === undefined || !(unit in SIZE_UNITS_BYTES)) {
    throw new TypeError(`"${text}" is not a size (examples: "5MB", "64KB", "1048576")`);
  }
  return Math.floor(Number(match[1]) * SIZE_UNITS_BYTES[unit]!);
}
