/**
 * Leaf schemas shared by the node configuration: durations, sizes, paths and addresses. Each one
 * accepts the operator's spelling ("2s", "5MB", "host:port", a relative path) and yields the value
 * the code uses (milliseconds, bytes, a checked address, an absolute path).
 */
import path from 'node:path';
import { z } from 'zod';
import { errorMessage, parseDurationMs, parseSizeBytes } from '../base/index.js';

export interface DurationRule {
  /** Smallest accepted positive value in milliseconds; 0 stays accepted only with `zeroDisables`. */
  readonly minMs?: number;
  /** "0s" is accepted and means "off" (pending_node_timeout, failover_timeout). */
  readonly zeroDisables?: boolean;
}

/** A duration string ("100ms", "2s", "30min", "1h") parsed into milliseconds. */
export function durationMs(rule: DurationRule = {}) {
  return z
    .string({
      // A bare number is the likely mistake ("5" meant as seconds or milliseconds?): ask for a unit.
      error: (issue) =>
        typeof issue.input === 'number' ? `${issue.input} is not a duration: give a unit (examples: "100ms", "2s", "30min", "1h")` : undefined,
    })
    .transform((text, ctx) => {
      let ms: number;
      try {
        ms = parseDurationMs(text);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: errorMessage(e), input: text });
        return z.NEVER;
      }
      if (ms === 0 && rule.zeroDisables) return 0;
      const minMs = rule.minMs ?? 0;
      if (ms < minMs) {
        const zero = rule.zeroDisables ? ' ("0s" disables it)' : '';
        ctx.addIssue({ code: 'custom', message: `"${text}" is too short: at least ${minMs}ms${zero}`, input: text });
        return z.NEVER;
      }
      return ms;
    })
    .meta({ description: 'duration such as "100ms", "2s", "30min", "1h"' });
}

/** A positive duration: timers that fire every so often cannot have period 0. */
export function positiveDurationMs() {
  return durationMs({ minMs: 1 });
}

/** A size: a string with a binary unit ("5MB", "64KB") or an integer number of bytes. */
export function sizeBytes(minBytes = 1, max?: { bytes: number; text: string; why: string }) {
  return z
    .union([z.string(), z.int().min(0)])
    .transform((value, ctx) => {
      let bytes: number;
      try {
        bytes = parseSizeBytes(value);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: errorMessage(e), input: value });
        return z.NEVER;
      }
      if (bytes < minBytes) {
        ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)} is too small: at least ${minBytes} bytes`, input: value });
        return z.NEVER;
      }
      if (max !== undefined && bytes > max.bytes) {
        ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)} is too large: at most ${max.text} (${max.why})`, input: value });
        return z.NEVER;
      }
      return bytes;
    })
    .meta({ description: 'size such as "5MB", "64KB" (1KB = 1024 bytes) or an integer number of bytes' });
}

/** A file or folder path; a relative path is resolved against the configuration file's folder. */
export function pathIn(baseDir: string) {
  return z
    .string()
    .min(1)
    .transform((p) => path.resolve(baseDir, p))
    .meta({ description: 'path; relative paths are resolved against the folder of the configuration file' });
}

export interface HostPort {
  /** Host name or IP address; an IPv6 address without its brackets. */
  readonly host: string;
  /** 0 asks the system for a free port. */
  readonly port: number;
}

const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/** True for a textual IPv4 address. */
export function isIpv4(text: string): boolean {
  return IPV4.test(text);
}

/** True for a textual IPv6 address (without brackets); a light check, enough to catch typos. */
export function isIpv6(text: string): boolean {
  if (!/^[0-9A-Fa-f:.]+$/.test(text) || !text.includes(':')) return false;
  const doubleColons = text.split('::').length - 1;
  if (doubleColons > 1) return false;
  const groups = text.split(':').filter((g) => g !== '');
  const last = groups[groups.length - 1];
  const embeddedV4 = last !== undefined && last.includes('.');
  if (embeddedV4 && !isIpv4(last)) return false;
  const hexGroups = embeddedV4 ? groups.slice(0, -1) : groups;
  if (!hexGroups.every((g) => /^[0-9A-Fa-f]{1,4}$/.test(g))) return false;
  const width = hexGroups.length + (embeddedV4 ? 2 : 0);
  return doubleColons === 1 ? width < 8 : width === 8;
}

/**
 * Parses "host:port" (IPv6 in brackets: "[::1]:8443"). Returns the reason as a string when the
 * text is not an address, so that callers can report it in their own words.
 */
export function parseHostPort(text: string): HostPort | string {
  const bracketed = /^\[([^\]]*)\]:(.*)$/.exec(text);
  let host: string;
  let portText: string;
  if (bracketed) {
    host = bracketed[1]!;
    portText = bracketed[2]!;
    if (!isIpv6(host)) return `"${text}" is not an address: "${host}" is not an IPv6 address`;
  } else {
    const colon = text.lastIndexOf(':');
    if (colon < 0) return `"${text}" is not an address (expected "host:port", e.g. "127.0.0.1:8000" or "[::1]:8000")`;
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (host.includes(':')) return `"${text}" is not an address: put an IPv6 host in brackets, e.g. "[::1]:8000"`;
    if (!(isIpv4(host) || (HOSTNAME.test(host) && !/^[\d.]+$/.test(host)))) {
      return `"${text}" is not an address: "${host}" is not a host name or IP address`;
    }
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    return `"${text}" is not an address: port "${portText}" is not an integer from 0 to 65535`;
  }
  return { host, port: Number(portText) };
}

/** Formats a host and port back into the configuration spelling (brackets around IPv6). */
export function formatHostPort(address: HostPort): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

/** A "host:port" string, checked; kept as text so that it can be logged and published as written. */
export function address() {
  return z
    .string()
    .superRefine((text, ctx) => {
      const parsed = parseHostPort(text);
      if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed, input: text });
    })
    .meta({ description: '"host:port"; IPv6 hosts in brackets ("[::1]:8000"); port 0 picks a free port' });
}
