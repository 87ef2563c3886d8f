/**
 * One QuickJS interpreter (a runtime and a context) holding one installed bundle: its modules are
 * compiled and evaluated once, on first use, and every request of that bundle runs in it, on the
 * node's thread, synchronously inside the request's KV transaction (docs/architecture.md, decision 2).
 *
 * Limits are the interpreter's own: a heap limit, a stack limit and an interrupt handler that stops
 * the script at its deadline. A request that hits one is answered 500 and the interpreter is
 * discarded (a fresh one is built for the next request), since a script stopped mid-way may have
 * left its module state half-changed.
 */
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from 'quickjs-emscripten-core';
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

/** A host function: takes the VM's argument handles, returns a handle (or undefined). */
export type HostFunction = (context: QuickJSContext, args: QuickJSHandle[]) => QuickJSHandle | undefined;
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

export class Interpreter {
  private readonly runtime: QuickJSRuntime;
  private readonly context: QuickJSContext;
  private readonly dispatch: QuickJSHandle;
  private readonly namespaces = new Map<string, QuickJSHandle>();
  private readonly functions = new Map<string, QuickJSHandle>();
  private deadlineMs = Number.POSITIVE_INFINITY;
  /** The request being handled: its body and fields are handed to the sandbox only if the handler asks for them. */
  private request: ScriptRequest | undefined;
  private disposed = false;
  /** Bytes of compiled function code in the interpreter (QuickJS's own count), once modules are loaded. */
  bytecodeBytes = 0;

  constructor(
    quickjs: QuickJSWASMModule,
    private readonly bundle: AppBundle,
    readonly options: RuntimeOptions,
    private readonly host: InterpreterHost,
  ) {
    this.runtime = quickjs.newRuntime();
    let context: QuickJSContext | undefined;
    try {
      this.runtime.setMemoryLimit(options.heapBytesMax);
      this.runtime.setMaxStackSize(options.stackBytesMax);
      this.runtime.setInterruptHandler(() => performance.now() > this.deadlineMs);
      // A failure handed back to the engine's loader corrupts its memory (seen with this build): a
      // module that is not in the bundle loads as one that throws (bundles are checked for their
      // imports before they are installed, see parseBundle).
      this.runtime.setModuleLoader(
        (name) => bundle.modules.get(name) ?? `throw new Error(${JSON.stringify(`module "${name}" is not in the bundle`)});`,
        (base, requested) => {
          try {
            return resolveImport(base, requested);
          } catch {
            return requested;
          }
        },
      );
      context = this.context = this.runtime.newContext();
      const requestBody: HostFunction = (c) => (this.request === undefined ? c.undefined : c.newArrayBuffer(toArrayBuffer(this.request.body)));
      const requestFields: HostFunction = (c) => (this.request === undefined ? c.undefined : c.newString(this.request.fields()));
      for (const name of HOST_FUNCTION_NAMES) {
        const fn = name === '__request_body' ? requestBody : name === '__request_fields' ? requestFields : host.functions[name];
        const handle = this.context.newFunction(name, (...args) => fn(this.context, args));
        this.context.setProp(this.context.global, name, handle);
        handle.dispose();
      }
      // The prelude is the service's own code: it runs without the application's deadline (a cold
      // engine can take longer than a short max_execution_time_ms to compile it).
      this.unwrap(this.context.evalCode(PRELUDE, 'prelude.js', { type: 'global', strict: true })).dispose();
      this.dispatch = this.context.getProp(this.context.global, '__covenant_dispatch');
      this.unwrap(this.context.evalCode('delete globalThis.__covenant_dispatch', 'prelude.js', { type: 'global' })).dispose();
    } catch (e) {
      // A runtime is freed only after its contexts (QuickJS asserts that no object is left).
      context?.dispose();
      this.runtime.dispose();
      throw e;
    }
  }

  /** Compiles every module without running it: a syntax error names its module. */
  compileAll(): void {
    this.withDeadline(() => {
      for (const [name, source] of this.bundle.modules) {
        const result = this.context.evalCode(source, name, { type: 'module', strict: true, compileOnly: true });
        if (result.error) {
          const failure = this.describe(result.error);
          result.error.dispose();
          // Compiling a module compiles what it imports: a syntax error names the file it is in.
          const where = failure.location ?? name;
          throw new ScriptFailure(failure.kind === 'Exception' ? 'Syntax' : failure.kind, `module "${where}": ${failure.message}`);
        }
        result.value.dispose();
      }
    });
  }

  /** Evaluates a module (once) and checks it exports `functionName`. */
  checkFunction(moduleName: string, functionName: string): void {
    this.withDeadline(() => this.functionHandle(moduleName, functionName));
  }

  /**
   * Calls a handler with the request: its body as text when it is UTF-8, its other fields (one JSON
   * text) and the body's bytes only when the handler asks for them. Host functions the handler
   * calls run meanwhile, on this thread; the writes it left pending are applied once it returned.
   */
  call(moduleName: string, functionName: string, request: ScriptRequest): ScriptResponse {
    return this.withDeadline(() => {
      const where = `${moduleName}.${functionName}`;
      const fn = this.functionHandle(moduleName, functionName);
      const text = utf8Text(request.body);
      const textHandle = text === undefined ? this.context.undefined : this.context.newString(text);
      const seedHandle = this.context.newNumber(request.seed);
      const writable = request.writable ? this.context.true : this.context.false;
      let result: QuickJSHandle;
      this.request = request;
      try {
        result = this.unwrap(this.context.callFunction(this.dispatch, this.context.undefined, fn, textHandle, seedHandle, writable), where);
        result = this.settle(result, where);
      } finally {
        this.request = undefined;
        textHandle.dispose();
        seedHandle.dispose();
      }
      try {
        return this.readResponse(result, where);
      } finally {
        result.dispose();
      }
    });
  }

  /** QuickJS's count of the interpreter's memory: total bytes used and bytes of compiled code. */
  memoryUsage(): { usedBytes: number; bytecodeBytes: number } {
    const handle = this.runtime.computeMemoryUsage();
    try {
      const usage = this.context.dump(handle) as { memory_used_size?: number; js_func_code_size?: number };
      return { usedBytes: usage.memory_used_size ?? 0, bytecodeBytes: usage.js_func_code_size ?? 0 };
    } finally {
      handle.dispose();
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const h of this.functions.values()) h.dispose();
    for (const h of this.namespaces.values()) h.dispose();
    this.dispatch.dispose();
    this.context.dispose();
    this.runtime.dispose();
  }

  private withDeadline<T>(body: () => T): T {
    if (this.disposed) throw new Error('the interpreter was disposed');
    this.deadlineMs = performance.now() + this.options.executionTimeMsMax;
    try {
      return body();
    } finally {
      this.deadlineMs = Number.POSITIVE_INFINITY;
    }
  }

  private functionHandle(moduleName: string, functionName: string): QuickJSHandle {
    const key = `${moduleName}\u0000${functionName}`;
    const known = this.functions.get(key);
    if (known !== undefined) return known;
    const namespace = this.namespace(moduleName);
    const fn = this.context.getProp(namespace, functionName);
    if (this.context.typeof(fn) !== 'function') {
      fn.dispose();
      throw new ScriptFailure('MissingExport', `module "${moduleName}" does not export a function "${functionName}"`);
    }
    this.functions.set(key, fn);
    return fn;
  }

  private namespace(moduleName: string): QuickJSHandle {
    const known = this.namespaces.get(moduleName);
    if (known !== undefined) return known;
    const source = this.bundle.modules.get(moduleName);
    if (source === undefined) throw new ScriptFailure('MissingExport', `module "${moduleName}" is not in the bundle`);
    const result = this.context.evalCode(source, moduleName, { type: 'module', strict: true });
    if (result.error) {
      const failure = this.describe(result.error);
      result.error.dispose();
      throw new ScriptFailure(failure.name === 'SyntaxError' ? 'Syntax' : failure.kind, `module "${moduleName}": ${failure.message}`);
    }
    const namespace = this.settle(result.value, `module "${moduleName}"`);
    this.namespaces.set(moduleName, namespace);
    this.bytecodeBytes = this.memoryUsage().bytecodeBytes;
    return namespace;
  }

  /** A promise (an async handler, a module with top-level await) settled now, or a failure. */
  private settle(handle: QuickJSHandle, where: string): QuickJSHandle {
    const state = this.context.getPromiseState(handle);
    if (state.type === 'fulfilled' && state.notAPromise) return handle;
    if (state.type === 'pending') {
      const jobs = this.runtime.executePendingJobs();
      if (jobs.error) {
        handle.dispose();
        const failure = this.describe(jobs.error);
        jobs.error.dispose();
        throw new ScriptFailure(failure.kind, `${where}: ${failure.message}`);
      }
    }
    const settled = this.context.getPromiseState(handle);
    handle.dispose();
    if (settled.type === 'fulfilled') return settled.value;
    if (settled.type === 'rejected') {
      const failure = this.describe(settled.error);
      settled.error.dispose();
      throw new ScriptFailure(failure.kind, `${where}: ${failure.message}`);
    }
    throw new ScriptFailure('InvalidResponse', `${where} returned a promise that did not settle (only synchronous work is possible in a transaction)`);
  }

  /**
   * The prelude's encoding of the answer: its JSON text, or {m: that text, b: bytes} where the
   * bytes are a bytes body (its length `n` when the request left writes pending) followed by the
   * values of those writes (`w`), which go to the host here.
   */
  private readResponse(result: QuickJSHandle, where: string): ScriptResponse {
    const c = this.context;
    if (c.typeof(result) === 'string') {
      const { s, h, k, t } = JSON.parse(c.getString(result)) as Answer;
      return t === undefined ? { status: s, headers: h, kind: k } : { status: s, headers: h, kind: k, text: t };
    }
    const m = c.getProp(result, 'm');
    const b = c.getProp(result, 'b');
    try {
      const { s, h, k, t, w, n } = JSON.parse(c.getString(m)) as Answer;
      const view = c.getArrayBuffer(b);
      try {
        if (w !== undefined) {
          try {
            this.host.applyWrites(w, view.value, k === 'bytes' ? (n ?? 0) : 0);
          } catch (e) {
            if (e instanceof ScriptFailure) throw new ScriptFailure(e.kind, `${where}: ${e.message}`);
            throw e;
          }
        }
        if (k === 'bytes') return { status: s, headers: h, kind: k, bytes: view.value.slice(0, w === undefined ? view.value.byteLength : (n ?? 0)) };
        return t === undefined ? { status: s, headers: h, kind: k } : { status: s, headers: h, kind: k, text: t };
      } finally {
        view.dispose();
      }
    } finally {
      m.dispose();
      b.dispose();
    }
  }

  private unwrap(result: ReturnType<QuickJSContext['evalCode']>, where?: string): QuickJSHandle {
    if (!result.error) return result.value;
    const failure = this.describe(result.error);
    result.error.dispose();
    throw new ScriptFailure(failure.kind, where === undefined ? failure.message : `${where}: ${failure.message}`);
  }

  /** Classifies a thrown VM value: the interpreter reports its limits as InternalError messages. */
  private describe(error: QuickJSHandle): { kind: ScriptFailureKind; name: string; message: string; location?: string } {
    let dumped: unknown;
    try {
      dumped = this.context.dump(error);
    } catch {
      dumped = undefined;
    }
    const record = typeof dumped === 'object' && dumped !== null ? (dumped as { name?: unknown; message?: unknown; stack?: unknown }) : undefined;
    const name = typeof record?.name === 'string' ? record.name : 'Error';
    const raw = typeof record?.message === 'string' ? record.message : `a non-Error value was thrown: ${String(JSON.stringify(dumped) ?? dumped)}`;
    const message = raw.length > EXCEPTION_MESSAGE_CHARS_MAX ? `${raw.slice(0, EXCEPTION_MESSAGE_CHARS_MAX)}…` : raw;
    if (name === 'InternalError' && message === 'interrupted') {
      return { kind: 'Timeout', name, message: `execution time limit exceeded (max_execution_time_ms ${this.options.executionTimeMsMax})` };
    }
    if (name === 'InternalError' && message === 'stack overflow') return { kind: 'StackOverflow', name, message: `stack size limit exceeded (max_stack_bytes ${this.options.stackBytesMax})` };
    if (message === 'out of memory' || (name === 'InternalError' && /out of memory|too long/.test(message)) || dumped === null) {
      return { kind: 'OutOfMemory', name, message: `memory limit exceeded (max_heap_bytes ${this.options.heapBytesMax}): ${message}` };
    }
    if (name === 'CovenantResponseError') return { kind: 'InvalidResponse', name, message };
    if (name === 'SyntaxError' && typeof record?.stack === 'string') {
      // QuickJS puts the file and line of a syntax error in the first frame of its stack.
      const frame = /at ([^\s:()]+):(\d+)/.exec(record.stack);
      if (frame !== null && this.bundle.modules.has(frame[1]!)) return { kind: 'Exception', name, message: `${name}: ${message} (line ${frame[2]})`, location: frame[1]! };
    }
    return { kind: 'Exception', name, message: `${name}: ${message}` };
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
