/**
 * The JavaScript sandbox for constitutions, ballots and join policies (docs/architecture.md, decision 10): QuickJS
 * compiled to WebAssembly (quickjs-emscripten, sync variant), so code from members runs in a separate
 * engine with its own heap and no access to the host: no `process`, `require`, file system, network
 * or timers exist inside it, only what a caller passes in as host functions.
 *
 * Every evaluation gets a fresh context (fresh globals, fresh module table), so nothing a ballot
 * does is visible to the next one; contexts share one runtime, which holds the memory limit. Each
 * call into the sandbox has a deadline (an interrupt handler polled by the interpreter), a stack
 * limit and the runtime's memory limit. After a call that hit a limit, the runtime is thrown away
 * and a new one is made, so a hostile script cannot leave a nearly full heap behind it.
 *
 * Values cross the boundary as JSON text, parsed and serialised with the context's own JSON
 * functions captured before any user code runs (so a script that replaces `JSON.parse` only fools
 * itself).
 */
import {
  newQuickJSWASMModuleFromVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSSyncVariant,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import * as variantModule from '@jitl/quickjs-wasmfile-release-sync';
import { CovenantError } from '../base/errors.js';

export interface SandboxLimits {
  /** Heap of the sandbox runtime. */
  readonly memoryBytesMax: number;
  /** Per call into the sandbox (module evaluation, each exported function call). */
  readonly executionTimeMsMax: number;
  /**
   * Interpreter stack. Kept small on purpose: under WebAssembly some native recursions (e.g.
   * JSON.stringify of a deeply nested value) use much more host stack than the interpreter
   * accounts for, and a host stack overflow must never happen (it would poison the engine).
   */
  readonly stackBytesMax: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  memoryBytesMax: 32 * 1024 * 1024,
  executionTimeMsMax: 1000,
  stackBytesMax: 64 * 1024,
};

/** Why a sandboxed evaluation failed; `message` is meant for the member who wrote the script. */
export type SandboxFailureKind = 'Syntax' | 'Exception' | 'Timeout' | 'OutOfMemory' | 'StackOverflow' | 'MissingExport' | 'BadValue' | 'Unavailable';

export class SandboxError extends CovenantError {
  constructor(
    readonly kind: SandboxFailureKind,
    message: string,
  ) {
    super(kind === 'Unavailable' ? 'SandboxUnavailable' : 'SandboxFailure', message, kind === 'Unavailable' ? 503 : 400, { kind });
    this.name = 'SandboxError';
  }
}

/** Host functions exposed as `globalThis.<name>`: each takes and returns JSON text (or undefined). */
export type HostFunctions = Readonly<Record<string, (...argsJson: string[]) => string | undefined>>;

export interface LoadedModule {
  /** Whether the module exports a function of this name. */
  hasFunction(name: string): boolean;
  /** Calls an exported function with JSON-serialisable arguments; returns its JSON-serialisable result. */
  call(name: string, args: readonly unknown[]): unknown;
}

export interface RunOptions {
  readonly source: string;
  /** Shown in stack traces: "ballot", "constitution", ... */
  readonly filename: string;
  /** Code evaluated as a script before the module (for example helpers built on host functions). */
  readonly prelude?: string;
  readonly host?: HostFunctions;
  readonly limits?: SandboxLimits;
}

// The package's types describe its CommonJS build while Node loads its ES build: accept both shapes.
const wasmVariant = ((variantModule as unknown as { default: { default?: QuickJSSyncVariant } & QuickJSSyncVariant }).default.default ??
  (variantModule as unknown as { default: QuickJSSyncVariant }).default) as QuickJSSyncVariant;

const RESULT_TEXT_BYTES_MAX = 4 * 1024 * 1024;

/**
 * One QuickJS WebAssembly instance. Load it once (asynchronously) with `loadJsEngine`; after that
 * every evaluation is synchronous, so it can run inside a KV transaction (docs/architecture.md, decision 2).
 */
export class JsEngine {
  private runtime: QuickJSRuntime | undefined;
  private runtimeLimits: SandboxLimits | undefined;
  private poisoned = false;

  constructor(
    private module: QuickJSWASMModule,
    private readonly monotonicMs: () => number = () => performance.now(),
  ) {}

  /**
   * Evaluates `source` as an ES module in a fresh context and hands it to `body`, which may call its
   * exports (each call with its own deadline). The context is disposed when `body` returns.
   */
  run<T>(options: RunOptions, body: (module: LoadedModule) => T): T {
    if (this.poisoned) throw new SandboxError('Unavailable', 'the JavaScript sandbox failed and is being restarted; retry shortly');
    const limits = options.limits ?? DEFAULT_SANDBOX_LIMITS;
    const runtime = this.runtimeFor(limits);
    const context = runtime.newContext();
    let hitLimit = false;
    const guard = <R>(what: string, fn: () => R): R => {
      const deadline = this.monotonicMs() + limits.executionTimeMsMax;
      runtime.setInterruptHandler(() => this.monotonicMs() > deadline);
      try {
        return fn();
      } catch (e) {
        if (e instanceof SandboxError) {
          if (e.kind === 'Timeout' || e.kind === 'OutOfMemory' || e.kind === 'StackOverflow') hitLimit = true;
          throw e;
        }
        if (e instanceof CovenantError) throw e;
        // A failure outside the interpreter's own checks (a host stack overflow inside WebAssembly):
        // the instance's memory may be inconsistent, so it is never used again.
        this.poison();
        throw new SandboxError('Unavailable', `${what}: the sandbox engine failed (${(e as Error).message}); it is being restarted`);
      } finally {
        runtime.removeInterruptHandler();
      }
    };
    try {
      const json = captureJson(context);
      try {
        if (options.host) installHostFunctions(context, options.host);
        if (options.prelude !== undefined) guard('prelude', () => consume(context, context.evalCode(options.prelude!, 'prelude.js', { type: 'global', strict: true })));
        const namespace = guard(`${options.filename}`, () => evaluateModule(context, runtime, options.source, options.filename));
        try {
          const loaded: LoadedModule = {
            hasFunction: (name) => {
              const fn = context.getProp(namespace, name);
              try {
                return context.typeof(fn) === 'function';
              } finally {
                fn.dispose();
              }
            },
            call: (name, args) =>
              guard(`${options.filename}.${name}`, () => {
                const fn = context.getProp(namespace, name);
                try {
                  if (context.typeof(fn) !== 'function') throw new SandboxError('MissingExport', `${options.filename} does not export a function "${name}"`);
                  const argHandles = args.map((a) => json.fromValue(a));
                  try {
                    const result = context.callFunction(fn, context.undefined, argHandles);
                    const value = unwrap(context, result);
                    try {
                      return json.toValue(value, `${options.filename}.${name}`);
                    } finally {
                      value.dispose();
                    }
                  } finally {
                    for (const h of argHandles) h.dispose();
                  }
                } finally {
                  fn.dispose();
                }
              }),
          };
          return body(loaded);
        } finally {
          namespace.dispose();
        }
      } finally {
        json.dispose();
      }
    } finally {
      context.dispose();
      if (hitLimit) this.dropRuntime();
    }
  }

  /** Syntax and export check of a module without running anything but its top level. */
  checkModule(source: string, filename: string, requiredFunctions: readonly string[], limits?: SandboxLimits): void {
    this.run({ source, filename, ...(limits ? { limits } : {}) }, (module) => {
      for (const name of requiredFunctions) {
        if (!module.hasFunction(name)) throw new SandboxError('MissingExport', `${filename} does not export a function "${name}"`);
      }
    });
  }

  private runtimeFor(limits: SandboxLimits): QuickJSRuntime {
    const same =
      this.runtimeLimits !== undefined &&
      this.runtimeLimits.memoryBytesMax === limits.memoryBytesMax &&
      this.runtimeLimits.stackBytesMax === limits.stackBytesMax;
    if (this.runtime !== undefined && same) return this.runtime;
    this.dropRuntime();
    const runtime = this.module.newRuntime();
    runtime.setMemoryLimit(limits.memoryBytesMax);
    runtime.setMaxStackSize(limits.stackBytesMax);
    this.runtime = runtime;
    this.runtimeLimits = limits;
    return runtime;
  }

  private dropRuntime(): void {
    if (this.runtime === undefined) return;
    const runtime = this.runtime;
    this.runtime = undefined;
    this.runtimeLimits = undefined;
    try {
      runtime.dispose();
    } catch {
      // A runtime that cannot be disposed cleanly is abandoned with its instance.
      this.poison();
    }
  }

  private poison(): void {
    if (this.poisoned) return;
    this.poisoned = true;
    this.runtime = undefined;
    this.runtimeLimits = undefined;
    void newQuickJSWASMModuleFromVariant(wasmVariant).then(
      (fresh) => {
        this.module = fresh;
        this.poisoned = false;
      },
      () => {
        // Stays unavailable: every call answers SandboxUnavailable.
      },
    );
  }

  /** True while a failed engine instance is being replaced. */
  get available(): boolean {
    return !this.poisoned;
  }
}

let shared: Promise<JsEngine> | undefined;

/** The process-wide engine (the WebAssembly instance is loaded once). */
export function loadJsEngine(): Promise<JsEngine> {
  shared ??= newQuickJSWASMModuleFromVariant(wasmVariant).then((module) => new JsEngine(module));
  return shared;
}

// ------------------------------------------------------------------ helpers

interface JsonBridge {
  fromValue(value: unknown): QuickJSHandle;
  toValue(handle: QuickJSHandle, where: string): unknown;
  dispose(): void;
}

/** Captures the context's pristine JSON.parse / JSON.stringify before user code can replace them. */
function captureJson(context: QuickJSContext): JsonBridge {
  const jsonObject = context.getProp(context.global, 'JSON');
  const parse = context.getProp(jsonObject, 'parse');
  const stringify = context.getProp(jsonObject, 'stringify');
  jsonObject.dispose();
  return {
    fromValue(value) {
      if (value === undefined) return context.undefined;
      const text = JSON.stringify(value);
      const str = context.newString(text);
      try {
        return context.unwrapResult(context.callFunction(parse, context.undefined, str));
      } finally {
        str.dispose();
      }
    },
    toValue(handle, where) {
      const type = context.typeof(handle);
      if (type === 'undefined') return undefined;
      if (type === 'boolean' || type === 'number' || type === 'string') return context.dump(handle) as unknown;
      if (type !== 'object') throw new SandboxError('BadValue', `${where} returned a ${type}, which has no JSON form`);
      const result = context.callFunction(stringify, context.undefined, handle);
      if (result.error) {
        const failure = describeError(context, result.error);
        result.error.dispose();
        throw new SandboxError(failure.kind, `${where} returned a value that cannot be serialised: ${failure.message}`);
      }
      try {
        if (context.typeof(result.value) !== 'string') throw new SandboxError('BadValue', `${where} returned a value with no JSON form`);
        const text = context.getString(result.value);
        if (text.length > RESULT_TEXT_BYTES_MAX) throw new SandboxError('BadValue', `${where} returned more than ${RESULT_TEXT_BYTES_MAX} bytes of JSON`);
        return JSON.parse(text) as unknown;
      } finally {
        result.value.dispose();
      }
    },
    dispose() {
      parse.dispose();
      stringify.dispose();
    },
  };
}

function installHostFunctions(context: QuickJSContext, host: HostFunctions): void {
  for (const [name, fn] of Object.entries(host)) {
    const handle = context.newFunction(name, (...args) => {
      const texts = args.map((a) => (context.typeof(a) === 'string' ? context.getString(a) : String(context.dump(a))));
      // A thrown Error crosses into the VM as an exception with the same name and message.
      const out = fn(...texts);
      return out === undefined ? undefined : context.newString(out);
    });
    context.setProp(context.global, name, handle);
    handle.dispose();
  }
}

function evaluateModule(context: QuickJSContext, runtime: QuickJSRuntime, source: string, filename: string): QuickJSHandle {
  const result = context.evalCode(source, filename, { type: 'module', strict: true });
  if (result.error) {
    const failure = describeError(context, result.error);
    result.error.dispose();
    throw new SandboxError(failure.kind === 'Exception' && failure.name === 'SyntaxError' ? 'Syntax' : failure.kind, `${filename}: ${failure.message}`);
  }
  // Module evaluation may answer a promise of the namespace (top-level await): settle it now.
  const handle = result.value;
  const state = context.getPromiseState(handle);
  if (state.type === 'fulfilled') {
    if (state.notAPromise) return handle;
    handle.dispose();
    return state.value;
  }
  runtime.executePendingJobs();
  const settled = context.getPromiseState(handle);
  handle.dispose();
  if (settled.type === 'fulfilled') return settled.value;
  if (settled.type === 'rejected') {
    const failure = describeError(context, settled.error);
    settled.error.dispose();
    throw new SandboxError(failure.kind, `${filename}: ${failure.message}`);
  }
  throw new SandboxError('BadValue', `${filename}: module evaluation did not complete (top-level await on something that never settles)`);
}

function unwrap(context: QuickJSContext, result: ReturnType<QuickJSContext['callFunction']>): QuickJSHandle {
  if (!result.error) return result.value;
  const failure = describeError(context, result.error);
  result.error.dispose();
  throw new SandboxError(failure.kind, failure.message);
}

function consume(context: QuickJSContext, result: ReturnType<QuickJSContext['evalCode']>): void {
  unwrap(context, result).dispose();
}

/** Classifies a thrown VM value: the interpreter reports its limits as InternalError messages. */
function describeError(context: QuickJSContext, error: QuickJSHandle): { kind: SandboxFailureKind; name: string; message: string } {
  let dumped: unknown;
  try {
    dumped = context.dump(error);
  } catch {
    dumped = undefined;
  }
  const name = typeof dumped === 'object' && dumped !== null && typeof (dumped as { name?: unknown }).name === 'string' ? (dumped as { name: string }).name : 'Error';
  const rawMessage =
    typeof dumped === 'object' && dumped !== null && typeof (dumped as { message?: unknown }).message === 'string'
      ? (dumped as { message: string }).message
      : `a non-Error value was thrown: ${safeText(dumped)}`;
  const message = rawMessage.length > 1000 ? `${rawMessage.slice(0, 1000)}…` : rawMessage;
  if (name === 'InternalError' && message === 'interrupted') return { kind: 'Timeout', name, message: 'execution time limit exceeded' };
  if (name === 'InternalError' && message === 'stack overflow') return { kind: 'StackOverflow', name, message: 'stack size limit exceeded' };
  if (message === 'out of memory' || (name === 'InternalError' && /out of memory|too long/.test(message))) {
    return { kind: 'OutOfMemory', name, message: `memory limit exceeded (${message})` };
  }
  if (dumped === null) return { kind: 'OutOfMemory', name, message: 'memory limit exceeded' };
  return { kind: 'Exception', name, message: `${name}: ${message}` };
}

function safeText(value: unknown): string {
  try {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  } catch {
    return String(value);
  }
}
