/**
 * One V8 isolate (`isolated-vm`) holding one installed bundle: its own heap, limited to the
 * runtime options' max_heap_bytes, and one context in which the prelude and the bundle's modules
 * are compiled and evaluated once, on first use. Every request of that bundle runs in it, on the
 * node's thread, synchronously inside the request's KV transaction (docs/architecture.md, decision 2);
 * the isolate shares nothing with the node's own context but copies of values.
 *
 * Limits are the isolate's own: its heap limit (an isolate past it is disposed by the engine, and
 * every later call fails), V8's stack limit, and a per-call timeout that stops the script at its
 * deadline. A request that hits one is answered 500 and the interpreter is discarded (a fresh one
 * is built for the next request), since a script stopped mid-way may have left its module state
 * half-changed.
 */
import ivm from 'isolated-vm';
import { resolveImport, type AppBundle } from './bundle.js';
import { EXCEPTION_MESSAGE_CHARS_MAX } from './limits.js';
import { HOST_FUNCTION_NAMES, PRELUDE } from './prelude.js';

export interface RuntimeOptions {
  readonly heapBytesMax: number;
  readonly stackBytesMax: number;
  readonly executionTimeMsMax: number;
}

/** Why a script failed; the frontend maps each to its error code. */
export type ScriptFailureKind = 'Exception' | 'Timeout' | 'OutOfMemory' | 'StackOverflow' | 'InvalidResponse' | 'Syntax' | 'MissingExport';

export class ScriptFailure extends Error {
  constructor(
    readonly kind: ScriptFailureKind,
    message: string,
  ) {
    super(message);
    this.name = 'ScriptFailure';
  }

  /** The interpreter stopped at one of its limits: its state cannot be trusted any more. */
  get hitLimit(): boolean {
    return this.kind === 'Timeout' || this.kind === 'OutOfMemory' || this.kind === 'StackOverflow';
  }
}

/** A host function: called from the sandbox with copies of its arguments; what it returns is copied back. */
export type HostFunction = (...args: unknown[]) => unknown;
/** The interpreter answers `__request_body` and `__request_fields` itself (from the request being handled). */
export type HostFunctions = Readonly<Record<Exclude<(typeof HOST_FUNCTION_NAMES)[number], '__request_body' | '__request_fields'>, HostFunction>>;

/** What the interpreter needs of the host: its functions, and where a handler's pending writes go once it returned. */
export interface InterpreterHost {
  readonly functions: HostFunctions;
  /** Applies the writes the prelude packed (host.ts), values in `bytes` from `offset` on; a refused or malformed write throws a ScriptFailure. */
  applyWrites(writes: unknown, bytes: Uint8Array, offset: number): void;
}

/** One request as the interpreter hands it to a handler. */
export interface ScriptRequest {
  /** Its fields (method, path, route, params, query, headers, caller) as JSON: built only if the handler reads one. */
  readonly fields: () => string;
  readonly body: Uint8Array;
  /** Seeds the request's Math.random. */
  readonly seed: number;
  /** Whether the handler may write (a readwrite endpoint). */
  readonly writable: boolean;
}

export interface ScriptResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly kind: 'none' | 'bytes' | 'text' | 'json';
  readonly text?: string;
  readonly bytes?: Uint8Array;
}

/** V8's code cache of each module of one bundle (its compiled bytecode) and its size, kept across the interpreters of that bundle. */
export type CodeCache = Map<string, { readonly data: ivm.ExternalCopy<ArrayBuffer>; readonly bytes: number }>;

/** The smallest heap an isolate is given (isolated-vm's own minimum). */
const ISOLATE_MEMORY_MB_MIN = 8;
/**
 * Deadlines of calls end on a grid of this many milliseconds. The engine arms a timer per call and
 * its timer thread wakes at each one's end, even when the call returned long before: calls whose
 * timers end together cost one wake-up (measured: 11–17 µs of CPU per call instead of 31–35, one call
 * every 200 µs). A call may run up to this much past its budget before it is stopped.
 */
export const DEADLINE_GRID_MS = 10;
/** What an async handler's call answers while its promise is pending: never a JSON text the prelude writes. */
const PENDING = '\u0000pending';

/**
 * Runs after the prelude: takes its dispatcher off the global object and gives the host three
 * functions it keeps references to — register a module's export as a handler, call a handler
 * (an async one's outcome is read with `settle` once the call's microtasks ran), settle.
 */
const GLUE = `(() => {
  'use strict';
  const dispatch = globalThis.__covenant_dispatch;
  delete globalThis.__covenant_dispatch;
  const handlers = [];
  // The outcome of the current call's promise only: a promise of an earlier call that settles late
  // (a handler kept its resolver) is ignored.
  let outcome;
  let calls = 0;
  globalThis.__covenant_register = (namespace, name) => {
    const fn = namespace[name];
    if (typeof fn !== 'function') return -1;
    handlers.push(fn);
    return handlers.length - 1;
  };
  globalThis.__covenant_call = (index, text, seed, writable) => {
    const call = ++calls;
    outcome = undefined;
    const result = dispatch(handlers[index], text, seed, writable);
    if (result === null || typeof result !== 'object' || typeof result.then !== 'function') return result;
    result.then((value) => { if (call === calls) outcome = { value }; }, (error) => { if (call === calls) outcome = { error }; });
    return ${JSON.stringify(PENDING)};
  };
  globalThis.__covenant_settle = () => {
    const settled = outcome;
    outcome = undefined;
    if (settled === undefined) return ${JSON.stringify(PENDING)};
    if ('error' in settled) throw settled.error;
    return settled.value;
  };
})();`;

export class Interpreter {
  private readonly isolate: ivm.Isolate;
  private readonly context: ivm.Context;
  private readonly register: ivm.Reference<(namespace: unknown, name: string) => number>;
  private readonly callHandler: ivm.Reference<(index: number, text: string | undefined, seed: number, writable: boolean) => unknown>;
  private readonly settleHandler: ivm.Reference<() => unknown>;
  private readonly modules = new Map<string, ivm.Module>();
  private readonly evaluated = new Set<string>();
  private readonly handlers = new Map<string, number>();
  /** The request being handled: its body and fields are handed to the sandbox only if the handler asks for them. */
  private request: ScriptRequest | undefined;
  private disposed = false;
  /** Bytes of V8's code cache (compiled bytecode) of the modules compiled so far. */
  bytecodeBytes = 0;
  /** Whether V8's code cache of every module compiled so far is held for the next interpreter (nothing compiled: false). */
  bytecodeUsed = false;
  /** Modules compiled from the code cache rather than from their source. */
  modulesFromCache = 0;

  constructor(
    private readonly bundle: AppBundle,
    readonly options: RuntimeOptions,
    private readonly host: InterpreterHost,
    private readonly codeCache: CodeCache = new Map(),
  ) {
    this.isolate = new ivm.Isolate({ memoryLimit: Math.max(ISOLATE_MEMORY_MB_MIN, Math.ceil(options.heapBytesMax / (1024 * 1024))) });
    try {
      this.context = this.isolate.createContextSync();
      const global = this.context.global;
      const requestBody = () => (this.request === undefined ? undefined : toArrayBuffer(this.request.body));
      const requestFields = () => this.request?.fields();
      for (const name of HOST_FUNCTION_NAMES) {
        const fn = name === '__request_body' ? requestBody : name === '__request_fields' ? requestFields : host.functions[name];
        global.setSync(name, new ivm.Callback(fn));
      }
      // The prelude is the service's own code: it runs without the application's deadline.
      this.context.evalSync(`${PRELUDE}\n${GLUE}`, { filename: 'prelude.js' });
      this.register = global.getSync('__covenant_register', { reference: true });
      this.callHandler = global.getSync('__covenant_call', { reference: true });
      this.settleHandler = global.getSync('__covenant_settle', { reference: true });
      this.context.evalSync('delete globalThis.__covenant_register; delete globalThis.__covenant_call; delete globalThis.__covenant_settle;');
    } catch (e) {
      this.isolate.dispose();
      throw e;
    }
  }

  /** Compiles every module without running it: a syntax error names its module. */
  compileAll(): void {
    for (const name of this.bundle.modules.keys()) this.module(name);
  }

  /** Evaluates a module (once) and checks it exports `functionName`. */
  checkFunction(moduleName: string, functionName: string): void {
    this.handler(moduleName, functionName);
  }

  /**
   * Calls a handler with the request: its body as text when it is UTF-8, its other fields (one JSON
   * text) and the body's bytes only when the handler asks for them. Host functions the handler
   * calls run meanwhile, on this thread; the writes it left pending are applied once it returned.
   */
  call(moduleName: string, functionName: string, request: ScriptRequest): ScriptResponse {
    const where = `${moduleName}.${functionName}`;
    const index = this.handler(moduleName, functionName);
    const startMs = performance.now();
    const timeout = timeoutMs(this.options.executionTimeMsMax, startMs);
    const deadline = startMs + timeout;
    this.request = request;
    let result: unknown;
    try {
      result = this.run(where, () => this.callHandler.applySync(undefined, [index, utf8Text(request.body), request.seed, request.writable], { timeout }));
      if (result === PENDING) {
        const left = Math.max(1, Math.ceil(deadline - performance.now()));
        result = this.run(where, () => this.settleHandler.applySync(undefined, [], { timeout: left }));
        if (result === PENDING) {
          throw new ScriptFailure('InvalidResponse', `${where} returned a promise that did not settle (only synchronous work is possible in a transaction)`);
        }
      }
    } finally {
      this.request = undefined;
    }
    return this.readResponse(result, where);
  }

  /** The isolate's heap in use (V8's count, with memory held outside it such as ArrayBuffers). */
  memoryUsage(): { usedBytes: number } {
    if (this.disposed || this.isolate.isDisposed) return { usedBytes: 0 };
    const heap = this.isolate.getHeapStatisticsSync();
    return { usedBytes: heap.used_heap_size + heap.externally_allocated_size };
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (!this.isolate.isDisposed) this.isolate.dispose();
  }

  private handler(moduleName: string, functionName: string): number {
    const key = `${moduleName}\u0000${functionName}`;
    const known = this.handlers.get(key);
    if (known !== undefined) return known;
    const namespace = this.evaluate(moduleName);
    const index = this.run(`module "${moduleName}"`, () => this.register.applySync(undefined, [namespace.derefInto(), functionName]));
    if (index < 0) throw new ScriptFailure('MissingExport', `module "${moduleName}" does not export a function "${functionName}"`);
    this.handlers.set(key, index);
    return index;
  }

  /** The module's namespace, once it was linked and its top level ran (within the time budget). */
  private evaluate(moduleName: string): ivm.Reference<unknown> {
    const module = this.module(moduleName);
    if (!this.evaluated.has(moduleName)) {
      const where = `module "${moduleName}"`;
      this.run(where, () => module.instantiateSync(this.context, (specifier, referrer) => this.module(this.nameOf(referrer, specifier))));
      this.run(where, () => module.evaluateSync({ timeout: this.options.executionTimeMsMax }));
      this.evaluated.add(moduleName);
    }
    return module.namespace;
  }

  private nameOf(referrer: ivm.Module, specifier: string): string {
    for (const [name, module] of this.modules) {
      if (module === referrer) return resolveImport(name, specifier);
    }
    throw new ScriptFailure('Exception', `an import of "${specifier}" comes from no module of the bundle`);
  }

  /** Compiles a module once (from the code cache when it holds it); a syntax error names the module and line. */
  private module(name: string): ivm.Module {
    const known = this.modules.get(name);
    if (known !== undefined) return known;
    const source = this.bundle.modules.get(name);
    if (source === undefined) throw new ScriptFailure('MissingExport', `module "${name}" is not in the bundle`);
    const cached = this.codeCache.get(name);
    let module: ivm.Module;
    try {
      module = this.isolate.compileModuleSync(source, cached === undefined ? { filename: name, produceCachedData: true } : { filename: name, cachedData: cached.data });
    } catch (e) {
      const failure = this.describe(e);
      throw new ScriptFailure(failure.kind === 'Exception' ? 'Syntax' : failure.kind, `module "${name}": ${failure.message}`);
    }
    const compiled = module as ivm.Module & ivm.CachedDataResult & { cachedDataRejected?: boolean };
    if (cached === undefined && compiled.cachedData !== undefined) this.codeCache.set(name, { data: compiled.cachedData, bytes: compiled.cachedData.copy().byteLength });
    if (cached !== undefined && compiled.cachedDataRejected !== true) this.modulesFromCache++;
    this.modules.set(name, module);
    this.bytecodeBytes += this.codeCache.get(name)?.bytes ?? 0;
    this.bytecodeUsed = [...this.modules.keys()].every((m) => this.codeCache.has(m));
    return module;
  }

  /** Runs a step in the sandbox: what it throws becomes a ScriptFailure (a limit's kind named). */
  private run<T>(where: string, step: () => T): T {
    if (this.disposed || this.isolate.isDisposed) throw new ScriptFailure('OutOfMemory', `${where}: the interpreter was discarded after a memory limit`);
    try {
      return step();
    } catch (e) {
      if (e instanceof ScriptFailure) throw e;
      const failure = this.describe(e);
      throw new ScriptFailure(failure.kind, `${where}: ${failure.message}`);
    }
  }

  /**
   * The prelude's encoding of the answer: its JSON text, then, when there are bytes, a NUL and the
   * bytes as Latin-1: a bytes body (its length `n` when the request left writes pending) followed
   * by the values of those writes (`w`), which go to the host here.
   */
  private readResponse(result: unknown, where: string): ScriptResponse {
    if (typeof result !== 'string') throw new ScriptFailure('InvalidResponse', `${where}: the answer is not in the prelude's form`);
    const split = result.indexOf('\u0000');
    if (split < 0) {
      const { s, h, k, t } = JSON.parse(result) as Answer;
      return t === undefined ? { status: s, headers: h, kind: k } : { status: s, headers: h, kind: k, text: t };
    }
    const { s, h, k, t, w, n } = JSON.parse(result.slice(0, split)) as Answer;
    const bytes = new Uint8Array(Buffer.from(result.slice(split + 1), 'latin1'));
    if (w !== undefined) {
      try {
        this.host.applyWrites(w, bytes, k === 'bytes' ? (n ?? 0) : 0);
      } catch (e) {
        if (e instanceof ScriptFailure) throw new ScriptFailure(e.kind, `${where}: ${e.message}`);
        throw e;
      }
    }
    if (k === 'bytes') return { status: s, headers: h, kind: k, bytes: w === undefined ? bytes : bytes.slice(0, n ?? 0) };
    return t === undefined ? { status: s, headers: h, kind: k } : { status: s, headers: h, kind: k, text: t };
  }

  /** Classifies what a step threw: the isolate reports its limits as errors of its own. */
  private describe(error: unknown): { kind: ScriptFailureKind; message: string } {
    const record = typeof error === 'object' && error !== null ? (error as { name?: unknown; message?: unknown }) : undefined;
    const name = typeof record?.name === 'string' ? record.name : 'Error';
    const raw = record === undefined || typeof record.message !== 'string' ? `a non-Error value was thrown: ${describeValue(error)}` : record.message;
    const message = raw.length > EXCEPTION_MESSAGE_CHARS_MAX ? `${raw.slice(0, EXCEPTION_MESSAGE_CHARS_MAX)}…` : raw;
    if (this.isolate.isDisposed || /disposed during execution due to memory limit/.test(message) || (name === 'RangeError' && message === 'Array buffer allocation failed')) {
      return { kind: 'OutOfMemory', message: `memory limit exceeded (max_heap_bytes ${this.options.heapBytesMax}): ${message}` };
    }
    if (message === 'Script execution timed out.') return { kind: 'Timeout', message: `execution time limit exceeded (max_execution_time_ms ${this.options.executionTimeMsMax})` };
    if (name === 'RangeError' && message === 'Maximum call stack size exceeded') return { kind: 'StackOverflow', message: `stack size limit exceeded: ${message}` };
    if (name === 'CovenantResponseError') return { kind: 'InvalidResponse', message };
    return { kind: 'Exception', message: `${name}: ${message}` };
  }
}

/** The timeout of a call starting at `nowMs` with `budgetMs`: it ends on the next DEADLINE_GRID_MS line after the budget. */
export function timeoutMs(budgetMs: number, nowMs: number): number {
  return Math.ceil((Math.floor(nowMs / DEADLINE_GRID_MS) + 1) * DEADLINE_GRID_MS + budgetMs - nowMs);
}

function describeValue(value: unknown): string {
  try {
    return String(JSON.stringify(value) ?? value);
  } catch {
    return typeof value;
  }
}

/** The answer's JSON from the prelude's encode. */
interface Answer {
  s: number;
  h: Record<string, string>;
  k: ScriptResponse['kind'];
  t?: string;
  /** Writes left pending, and the length of the bytes body before their values. */
  w?: unknown;
  n?: number;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The body as text when it is valid UTF-8 (most are JSON), so that the handler reads it without a call back. */
function utf8Text(body: Uint8Array): string | undefined {
  if (body.byteLength === 0) return '';
  try {
    return strictUtf8.decode(body);
  } catch {
    return undefined;
  }
}

export function toArrayBuffer(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}
