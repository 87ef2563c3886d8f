/**
 * The logging interface every module takes as a collaborator. The implementation that writes
 * lines (text or the spec's JSON fields) lives in src/platform/logger.ts; code in the
 * deterministic zone and tests use `nullLogger` or a `MemoryLogger`.
 */

/** The spec's level names, least severe first. `fail` is an error; `fatal` precedes a stop. */
export type LogLevel = 'trace' | 'debug' | 'info' | 'fail' | 'fatal';

export const LOG_LEVEL_NAMES: readonly LogLevel[] = ['trace', 'debug', 'info', 'fail', 'fatal'];

/** Severity of each level; a logger set to level L writes the events whose severity is >= L's. */
export const LOG_LEVEL_SEVERITY: Readonly<Record<LogLevel, number>> = { trace: 10, debug: 20, info: 30, fail: 50, fatal: 60 };

/** Extra key/value pairs of one event; an Error value is written with its message (and stack in JSON). */
export type LogFields = Readonly<Record<string, unknown>>;

export interface ChildLoggerOptions {
  /**
   * The events come from the node's trusted part (the enclave side): JSON lines then carry `e_ts`
   * besides the host's `h_ts`. In virtual mode both are taken from the same clock.
   */
  readonly enclave?: boolean;
}

export interface Logger {
  trace(msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  fail(msg: string, fields?: LogFields): void;
  fatal(msg: string, fields?: LogFields): void;
  /** Whether events at `level` are written: lets callers skip building costly messages. */
  enabled(level: LogLevel): boolean;
  /** A logger adding `bindings` to every event (e.g. `{ node_id }`). */
  child(bindings: LogFields, options?: ChildLoggerOptions): Logger;
  /** A logger for application-specific events: they carry `tag: "app"` (or the given tag). */
  tag(tag?: string): Logger;
}

/** Discards everything. */
export const nullLogger: Logger = {
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  fail: () => undefined,
  fatal: () => undefined,
  enabled: () => false,
  child: () => nullLogger,
  tag: () => nullLogger,
};

/** One event as recorded by a MemoryLogger. */
export interface LogEntry {
  readonly level: LogLevel;
  readonly msg: string;
  /** Bindings of the logger chain, then the event's own fields. */
  readonly fields: LogFields;
  readonly tag: string | undefined;
  readonly enclave: boolean;
}

/**
 * Keeps events in memory, for tests that check what a component logged (e.g. that a skipped
 * cleanup cycle writes a failure-level line). Children share their root's `entries`. Holds at most
 * `maxEntries` events, dropping the oldest, so a long simulation cannot exhaust memory.
 */
export class MemoryLogger implements Logger {
  readonly entries: LogEntry[];
  private readonly minSeverity: number;
  private readonly bindings: LogFields;
  private readonly tagName: string | undefined;
  private readonly isEnclave: boolean;
  private readonly maxEntries: number;

  constructor(level: LogLevel = 'trace', maxEntries = 100_000) {
    this.entries = [];
    this.minSeverity = LOG_LEVEL_SEVERITY[level];
    this.bindings = {};
    this.tagName = undefined;
    this.isEnclave = false;
    this.maxEntries = maxEntries;
  }

  trace(msg: string, fields?: LogFields): void {
    this.record('trace', msg, fields);
  }
  debug(msg: string, fields?: LogFields): void {
    this.record('debug', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.record('info', msg, fields);
  }
  fail(msg: string, fields?: LogFields): void {
    this.record('fail', msg, fields);
  }
  fatal(msg: string, fields?: LogFields): void {
    this.record('fatal', msg, fields);
  }

  enabled(level: LogLevel): boolean {
    return LOG_LEVEL_SEVERITY[level] >= this.minSeverity;
  }

  child(bindings: LogFields, options: ChildLoggerOptions = {}): MemoryLogger {
    return this.derive({ ...this.bindings, ...bindings }, this.tagName, options.enclave ?? this.isEnclave);
  }

  tag(tag = 'app'): MemoryLogger {
    return this.derive(this.bindings, tag, this.isEnclave);
  }

  /** Messages logged at `level` (all levels when omitted), in order. */
  messages(level?: LogLevel): string[] {
    return this.entries.filter((e) => level === undefined || e.level === level).map((e) => e.msg);
  }

  private derive(bindings: LogFields, tagName: string | undefined, enclave: boolean): MemoryLogger {
    const derived = Object.create(MemoryLogger.prototype) as MemoryLogger;
    Object.assign(derived, {
      entries: this.entries,
      minSeverity: this.minSeverity,
      bindings,
      tagName,
      isEnclave: enclave,
      maxEntries: this.maxEntries,
    });
    return derived;
  }

  private record(level: LogLevel, msg: string, fields: LogFields | undefined): void {
    if (!this.enabled(level)) return;
    if (this.entries.length >= this.maxEntries) this.entries.shift();
    this.entries.push({ level, msg, fields: { ...this.bindings, ...fields }, tag: this.tagName, enclave: this.isEnclave });
  }
}
