/**
 * The node's logger: one line per event, to stdout by default. `Json` writes the spec's fields
 * (`h_ts`, `e_ts` for events from the trusted part, `file`, `number`, `level`, `msg`, `tag`, then
 * any extra fields) through pino; `Text` writes a readable line:
 *   2026-11-20T12:00:00.123Z info  [node.ts:42] message key=value
 */
import path from 'node:path';
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import {
  LOG_LEVEL_SEVERITY,
  type ChildLoggerOptions,
  type LogFields,
  type Logger,
  type LogLevel,
} from '../base/log.js';
import type { LogFormat } from '../config/index.js';

export interface LoggerOptions {
  readonly format?: LogFormat;
  readonly level?: LogLevel;
  /** A writable stream, or a file descriptor (default 1, stdout). */
  readonly destination?: NodeJS.WritableStream | number;
  /**
   * For a file descriptor: write each line before returning (default true). With false, lines are
   * buffered and written asynchronously (cheaper at debug and trace levels); the buffer is flushed
   * on exit and after a fatal event, but lines can be lost if the process is killed, and a fatal
   * line can overtake lines whose write was still in flight. Crash logs matter most, hence the default.
   */
  readonly sync?: boolean;
  /** Added to every event as `name` (e.g. "node0" when several nodes share one terminal). */
  readonly name?: string;
  /** Record the caller's `file` and `number` (default true). Costs one one-frame stack capture per written event. */
  readonly caller?: boolean;
  /** Wall clock in milliseconds since the epoch; the simulator passes its own. */
  readonly now?: () => number;
}

/** A Logger that owns an output buffer. */
export interface PlatformLogger extends Logger {
  child(bindings: LogFields, options?: ChildLoggerOptions): PlatformLogger;
  tag(tag?: string): PlatformLogger;
  /** Writes out buffered lines synchronously (before exiting, or in tests). */
  flush(): void;
}

interface Sink {
  write(line: string): unknown;
  flushSync?: () => void;
}

/** One writer per file descriptor and mode, shared, so lines from different loggers keep their order. */
const fdSinks = new Map<string, Sink>();

function sinkFor(destination: NodeJS.WritableStream | number, sync: boolean): Sink {
  if (typeof destination !== 'number') return destination;
  const key = `${destination}:${sync}`;
  let sink = fdSinks.get(key);
  if (sink === undefined) {
    // pino.destination registers a flush on process exit for asynchronous writers.
    sink = pino.destination({ dest: destination, sync });
    fdSinks.set(key, sink);
  }
  return sink;
}

function flushSink(sink: Sink): void {
  try {
    sink.flushSync?.();
  } catch (e) {
    // SonicBoom refuses flushSync while its fd is still opening; lines then go out with the next write.
    if (!(e instanceof Error && /not ready/.test(e.message))) throw e;
  }
}

interface Caller {
  readonly file: string;
  readonly number: number;
}

const UNKNOWN_CALLER: Caller = { file: 'unknown', number: 0 };

/** Mapped callers by raw (generated-code) position; call sites are finite, the bound is a safety net. */
const callerCache = new Map<string, Caller>();
const CALLER_CACHE_ENTRIES_MAX = 10_000;

function rawCallSite(_error: Error, frames: NodeJS.CallSite[]): NodeJS.CallSite[] {
  return frames;
}

/**
 * The file and line of the code that called `method`, as the source says (through Node's
 * source-map support when it is on: --enable-source-maps, tsx). Formatting a mapped stack costs
 * ~10-20 µs, so it is done once per call site: the raw position of the one captured frame, read
 * without formatting, is the cache key.
 */
function callerOf(method: (...args: never[]) => unknown): Caller {
  const limit = Error.stackTraceLimit;
  const prepare = Error.prepareStackTrace;
  Error.stackTraceLimit = 1;
  try {
    Error.prepareStackTrace = rawCallSite;
    const raw: { stack?: unknown } = {};
    Error.captureStackTrace(raw, method);
    // The stack is formatted lazily, on first read: read it while the raw formatter is installed.
    const site = (raw.stack as NodeJS.CallSite[] | undefined)?.[0];
    Error.prepareStackTrace = prepare;
    const key = site === undefined ? undefined : `${site.getFileName() ?? ''}:${site.getLineNumber() ?? 0}:${site.getColumnNumber() ?? 0}`;
    const cached = key === undefined ? undefined : callerCache.get(key);
    if (cached !== undefined) return cached;
    const formatted: { stack?: string } = {};
    Error.captureStackTrace(formatted, method);
    const caller = parseFrame(formatted.stack ?? '');
    if (key !== undefined && callerCache.size < CALLER_CACHE_ENTRIES_MAX) callerCache.set(key, caller);
    return caller;
  } finally {
    Error.prepareStackTrace = prepare;
    Error.stackTraceLimit = limit;
  }
}

/** "Error\n    at f (file:///src/node/node.ts:42:7)" -> node.ts, 42. */
function parseFrame(stack: string): Caller {
  const frame = stack.slice(stack.lastIndexOf('\n') + 1).trim();
  const match = /([^\s()]+):(\d+):\d+\)?$/.exec(frame);
  if (match === null) return UNKNOWN_CALLER;
  return { file: path.basename(match[1]!), number: Number(match[2]) };
}

/** How one event becomes bytes: pino's JSON serialisation, or the text line. */
interface Backend {
  write(level: LogLevel, msg: string, fields: LogFields | undefined, caller: Caller | undefined, enclave: boolean): void;
  child(bindings: LogFields): Backend;
}

function isoTime(now: () => number): string {
  return new Date(now()).toISOString();
}

class JsonBackend implements Backend {
  constructor(
    private readonly pinoLogger: PinoLogger<'fail'>,
    private readonly now: () => number,
  ) {}

  write(level: LogLevel, msg: string, fields: LogFields | undefined, caller: Caller | undefined, enclave: boolean): void {
    const head: Record<string, unknown> = {};
    // In virtual mode the trusted part runs in this process: its clock is the host clock.
    if (enclave) head['e_ts'] = isoTime(this.now);
    if (caller !== undefined) {
      head['file'] = caller.file;
      head['number'] = caller.number;
    }
    this.pinoLogger[level](fields === undefined ? head : { ...head, ...serialiseErrors(fields) }, msg);
  }

  child(bindings: LogFields): Backend {
    return new JsonBackend(this.pinoLogger.child(serialiseErrors(bindings)) as PinoLogger<'fail'>, this.now);
  }
}

/** Errors are not plain data: write their type, message and stack instead of `{}`. */
function serialiseErrors(fields: LogFields): LogFields {
  let copy: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(fields)) {
    if (value instanceof Error) {
      copy ??= { ...fields };
      copy[key] = serialiseError(value);
    }
  }
  return copy ?? fields;
}

function serialiseError(error: Error): Record<string, unknown> {
  const code = (error as { code?: unknown }).code;
  return code === undefined
    ? { type: error.name, message: error.message, stack: error.stack }
    : { type: error.name, code, message: error.message, stack: error.stack };
}

class TextBackend implements Backend {
  constructor(
    private readonly sink: Sink,
    private readonly now: () => number,
    /** Bindings already rendered as " key=value" pairs. */
    private readonly boundText: string,
  ) {}

  write(level: LogLevel, msg: string, fields: LogFields | undefined, caller: Caller | undefined): void {
    const where = caller === undefined ? '' : ` [${caller.file}:${caller.number}]`;
    const extra = fields === undefined ? '' : renderFields(fields);
    this.sink.write(`${isoTime(this.now)} ${level.padEnd(5)}${where} ${oneLine(msg)}${this.boundText}${extra}\n`);
  }

  child(bindings: LogFields): Backend {
    return new TextBackend(this.sink, this.now, this.boundText + renderFields(bindings));
  }
}

/** One event, one line: line breaks inside a message are escaped. */
function oneLine(text: string): string {
  return text.includes('\n') || text.includes('\r') ? text.replace(/\r/g, '\\r').replace(/\n/g, '\\n') : text;
}

function renderFields(fields: LogFields): string {
  let text = '';
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    text += ` ${key}=${renderValue(value)}`;
  }
  return text;
}

function renderValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=\\]+$/.test(value) ? value : JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Error) return JSON.stringify(value.message);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    // Cyclic structures: a log line must never throw.
    return '"[unserialisable]"';
  }
}

class NodeLogger implements PlatformLogger {
  constructor(
    private readonly backend: Backend,
    private readonly sink: Sink,
    private readonly minSeverity: number,
    private readonly caller: boolean,
    private readonly isEnclave: boolean,
  ) {}

  trace(msg: string, fields?: LogFields): void {
    if (LOG_LEVEL_SEVERITY.trace >= this.minSeverity) this.emit('trace', msg, fields, NodeLogger.prototype.trace);
  }
  debug(msg: string, fields?: LogFields): void {
    if (LOG_LEVEL_SEVERITY.debug >= this.minSeverity) this.emit('debug', msg, fields, NodeLogger.prototype.debug);
  }
  info(msg: string, fields?: LogFields): void {
    if (LOG_LEVEL_SEVERITY.info >= this.minSeverity) this.emit('info', msg, fields, NodeLogger.prototype.info);
  }
  fail(msg: string, fields?: LogFields): void {
    if (LOG_LEVEL_SEVERITY.fail >= this.minSeverity) this.emit('fail', msg, fields, NodeLogger.prototype.fail);
  }
  fatal(msg: string, fields?: LogFields): void {
    this.emit('fatal', msg, fields, NodeLogger.prototype.fatal);
    // A fatal event usually precedes the process ending: do not leave it in a buffer.
    this.flush();
  }

  enabled(level: LogLevel): boolean {
    return LOG_LEVEL_SEVERITY[level] >= this.minSeverity;
  }

  child(bindings: LogFields, options: ChildLoggerOptions = {}): PlatformLogger {
    return new NodeLogger(this.backend.child(bindings), this.sink, this.minSeverity, this.caller, options.enclave ?? this.isEnclave);
  }

  tag(tag = 'app'): PlatformLogger {
    return this.child({ tag });
  }

  flush(): void {
    flushSink(this.sink);
  }

  private emit(level: LogLevel, msg: string, fields: LogFields | undefined, method: (...args: never[]) => unknown): void {
    this.backend.write(level, msg, fields, this.caller ? callerOf(method) : undefined, this.isEnclave);
  }
}

const PINO_LEVELS: Record<LogLevel, number> = { ...LOG_LEVEL_SEVERITY };

/** Creates the process's logger (see LoggerOptions for the defaults). */
export function createLogger(options: LoggerOptions = {}): PlatformLogger {
  const level = options.level ?? 'info';
  const now = options.now ?? Date.now;
  const sink = sinkFor(options.destination ?? 1, options.sync ?? true);
  const base = options.name === undefined ? {} : { name: options.name };
  let backend: Backend;
  if ((options.format ?? 'Text') === 'Json') {
    const pinoLogger = pino(
      {
        level,
        customLevels: PINO_LEVELS,
        useOnlyCustomLevels: true,
        base: null,
        messageKey: 'msg',
        // Errors are serialised before they reach pino, under any key (see serialiseErrors).
        serializers: { err: (value: unknown) => value },
        timestamp: () => `,"h_ts":"${isoTime(now)}"`,
        formatters: { level: (label) => ({ level: label }) },
      },
      sink as DestinationStream,
    );
    backend = new JsonBackend(pinoLogger as unknown as PinoLogger<'fail'>, now);
  } else {
    backend = new TextBackend(sink, now, '');
  }
  if (options.name !== undefined) backend = backend.child(base);
  return new NodeLogger(backend, sink, LOG_LEVEL_SEVERITY[level], options.caller ?? true, false);
}
