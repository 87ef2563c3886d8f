/**
 * The application engine: one QuickJS WebAssembly instance on the node's thread (the engine the
 * constitution uses, in its synchronous build), so that a handler runs synchronously inside its
 * KV transaction. Its whole memory is capped (ENGINE_MEMORY_BYTES_MAX); each installed bundle gets
 * an interpreter with the runtime options in force (docs/apps.md).
 *
 * The interpreter of the current bundle is kept between requests (its modules are compiled and
 * evaluated once); it is rebuilt when the bundle or the runtime options change, and after a request
 * that hit a limit. A failure of the WebAssembly instance itself (a trap) makes the engine load a
 * new instance; requests meanwhile are answered 503.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { newQuickJSWASMModuleFromVariant, newVariant, type QuickJSSyncVariant, type QuickJSWASMModule } from 'quickjs-emscripten-core';
import * as variantModule from '@jitl/quickjs-wasmfile-release-sync';
import { parseBundle, BundleError, type AppBundle } from './bundle.js';
import { createHost, type RequestScope } from './host.js';
import { Interpreter, ScriptFailure, type RuntimeOptions } from './interpreter.js';
import {
  DEFAULT_EXECUTION_TIME_MS_MAX,
  DEFAULT_HEAP_BYTES_MAX,
  DEFAULT_STACK_BYTES_MAX,
  ENGINE_MEMORY_BYTES_MAX,
  EXECUTION_TIME_MS_MAX_LIMIT,
  HEAP_BYTES_MAX_LIMIT,
  HEAP_BYTES_MAX_MIN,
  STACK_BYTES_MAX_LIMIT,
} from './limits.js';

// The package's types describe its CommonJS build while Node loads its ES build: accept both shapes.
const wasmVariant = ((variantModule as unknown as { default: { default?: QuickJSSyncVariant } & QuickJSSyncVariant }).default.default ??
  (variantModule as unknown as { default: QuickJSSyncVariant }).default) as QuickJSSyncVariant;

const WASM_PAGE_BYTES = 65536;
/** The emscripten build's own initial memory (16 MiB): the instance needs at least that much. */
const WASM_INITIAL_BYTES = 16 * 1024 * 1024;

interface WasmApi {
  compile(bytes: Uint8Array): Promise<unknown>;
  readonly Memory: new (descriptor: { initial: number; maximum: number }) => unknown;
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

export const DEFAULT_RUNTIME_OPTIONS: RuntimeOptions = {
  heapBytesMax: DEFAULT_HEAP_BYTES_MAX,
  stackBytesMax: DEFAULT_STACK_BYTES_MAX,
  executionTimeMsMax: DEFAULT_EXECUTION_TIME_MS_MAX,
};

/** The runtime options of a stored set_js_runtime_options record (defaults for what it leaves out; bounded). */
export function runtimeOptionsOf(stored: unknown): RuntimeOptions {
  const record = (typeof stored === 'object' && stored !== null ? stored : {}) as Record<string, unknown>;
  const pick = (name: string, fallback: number, min: number, max: number) => {
    const value = record[name];
    return typeof value === 'number' && Number.isInteger(value) ? Math.min(Math.max(value, min), max) : fallback;
  };
  return {
    heapBytesMax: pick('max_heap_bytes', DEFAULT_HEAP_BYTES_MAX, HEAP_BYTES_MAX_MIN, HEAP_BYTES_MAX_LIMIT),
    stackBytesMax: pick('max_stack_bytes', DEFAULT_STACK_BYTES_MAX, 64 * 1024, STACK_BYTES_MAX_LIMIT),
    executionTimeMsMax: pick('max_execution_time_ms', DEFAULT_EXECUTION_TIME_MS_MAX, 1, EXECUTION_TIME_MS_MAX_LIMIT),
  };
}

/**
 * A bundle is checked with the default heap and stack, and the time budget of member JavaScript in
 * a governance request (SANDBOX_REQUEST_TIME_MS_MAX) for each step: compiling every module, then
 * evaluating each endpoint's module.
 */
const CHECK_RUNTIME_OPTIONS: RuntimeOptions = { ...DEFAULT_RUNTIME_OPTIONS, executionTimeMsMax: 300 };

const WARM_UP_BUNDLE = {
  metadata: { endpoints: { '/warm-up': { get: { js_module: 'app.js', js_function: 'get', authn_policies: [], mode: 'readonly' } } } },
  modules: [{ name: 'app.js', module: 'export function get() { return { body: covenant.bufToStr(covenant.strToBuf("ok")) } }' }],
};

let compiled: Promise<unknown> | undefined;

/** The engine's WebAssembly code, compiled once per process and instantiated for each instance. */
function compiledWasm(): Promise<unknown> {
  compiled ??= (async () => {
    const require = createRequire(import.meta.url);
    return wasm.compile(await readFile(require.resolve('@jitl/quickjs-wasmfile-release-sync/wasm')));
  })();
  return compiled;
}

async function loadQuickJs(): Promise<QuickJSWASMModule> {
  const wasmModule = await compiledWasm();
  const memory = new wasm.Memory({ initial: WASM_INITIAL_BYTES / WASM_PAGE_BYTES, maximum: ENGINE_MEMORY_BYTES_MAX / WASM_PAGE_BYTES });
  return newQuickJSWASMModuleFromVariant(newVariant(wasmVariant, { wasmModule: wasmModule as never, wasmMemory: memory as never }));
}

/** An interpreter and what it was built for. */
interface CachedInterpreter {
  readonly source: object;
  readonly options: RuntimeOptions;
  readonly interpreter: Interpreter;
}

export class AppEngine {
  private quickjs: QuickJSWASMModule | undefined;
  /** A second instance, loaded ahead, that takes over at once when the current one is dropped. */
  private spare: QuickJSWASMModule | undefined;
  private reloading: Promise<void> | undefined;
  private cached: CachedInterpreter | undefined;
  private scope: RequestScope | undefined;
  private readonly host = createHost(() => this.scope);
  /** Interpreters built so far (a rebuild after a limit counts). */
  interpretersBuilt = 0;
  /** WebAssembly instances dropped after a script hit a limit or the engine failed. */
  instancesReplaced = 0;

  private constructor(quickjs: QuickJSWASMModule, spare: QuickJSWASMModule) {
    this.quickjs = quickjs;
    this.spare = spare;
  }

  static async load(): Promise<AppEngine> {
    const [quickjs, spare] = await Promise.all([loadQuickJs(), loadQuickJs()]);
    const engine = new AppEngine(quickjs, spare);
    // The first interpreter of an instance compiles much of the engine's own code: pay for it now,
    // not in the first request's time budget.
    engine.checkBundle(WARM_UP_BUNDLE);
    return engine;
  }

  /** False while a new WebAssembly instance is loading after a failure of the previous one. */
  get available(): boolean {
    return this.quickjs !== undefined;
  }

  /**
   * Checks a bundle as set_js_app carries it: its shape, that every module compiles, and that
   * every endpoint's module evaluates and exports its function. Throws a BundleError naming the
   * module, function or key at fault.
   */
  checkBundle(value: unknown): AppBundle {
    const bundle = parseBundle(value);
    // Compiling and evaluating happen in two interpreters: QuickJS cannot free a runtime in which a
    // module was compiled on its own and then evaluated again.
    this.checkIn(bundle, (interpreter) => interpreter.compileAll());
    this.checkIn(bundle, (interpreter) => {
      for (const endpoint of bundle.endpoints) {
        try {
          interpreter.checkFunction(endpoint.properties.js_module, endpoint.properties.js_function);
        } catch (e) {
          if (!(e instanceof ScriptFailure)) throw e;
          const where = `metadata.endpoints."${endpoint.path}".${endpoint.method.toLowerCase()}`;
          throw new ScriptFailure(e.kind, `${where}: ${e.message}`);
        }
      }
    });
    return bundle;
  }

  private checkIn(bundle: AppBundle, body: (interpreter: Interpreter) => void): void {
    const interpreter = new Interpreter(this.instance(), bundle, CHECK_RUNTIME_OPTIONS, this.host);
    try {
      body(interpreter);
    } catch (e) {
      // A script stopped at a limit can leave objects QuickJS cannot free: drop the whole instance.
      if (!(e instanceof ScriptFailure) || e.hitLimit) this.replaceInstance();
      else this.dispose(interpreter);
      if (e instanceof ScriptFailure) throw new BundleError(e.message);
      throw e;
    }
    this.dispose(interpreter);
  }

  /**
   * Runs `body` with the interpreter of `bundle` (built on first use; `source` is the stored record
   * the bundle came from, whose identity tells a new installation) and `scope` as the request's
   * host scope. A limit hit discards the interpreter.
   */
  withInterpreter<T>(source: object, bundle: AppBundle, options: RuntimeOptions, scope: RequestScope, body: (interpreter: Interpreter) => T): T {
    const interpreter = this.interpreterFor(source, bundle, options);
    this.scope = scope;
    try {
      return body(interpreter);
    } catch (e) {
      if (e instanceof ScriptFailure) {
        // A script stopped at a limit can leave objects QuickJS cannot free (disposing its runtime
        // would abort the instance): the interpreter goes with its whole instance.
        if (e.hitLimit) this.replaceInstance();
        throw e;
      }
      // Not the script's failure: the WebAssembly instance may be broken (a trap).
      this.replaceInstance();
      throw e;
    } finally {
      this.scope = undefined;
    }
  }

  /** Figures for GET /node/js_metrics. */
  cachedInterpreter(): { options: RuntimeOptions; bytecodeBytes: number; usedBytes: number } | undefined {
    const cached = this.cached;
    if (cached === undefined) return undefined;
    const usage = cached.interpreter.memoryUsage();
    return { options: cached.options, bytecodeBytes: cached.interpreter.bytecodeBytes, usedBytes: usage.usedBytes };
  }

  /** Resolves once the engine can run scripts (after a reload, if one is under way). */
  async ready(): Promise<void> {
    await this.reloading;
  }

  private instance(): QuickJSWASMModule {
    if (this.quickjs === undefined) {
      if (this.reloading === undefined) this.replaceInstance();
      throw new EngineUnavailable();
    }
    return this.quickjs;
  }

  private interpreterFor(source: object, bundle: AppBundle, options: RuntimeOptions): Interpreter {
    const cached = this.cached;
    if (cached !== undefined && cached.source === source && sameOptions(cached.options, options)) return cached.interpreter;
    this.discardInterpreter();
    const interpreter = new Interpreter(this.instance(), bundle, options, this.host);
    this.interpretersBuilt++;
    this.cached = { source, options, interpreter };
    return interpreter;
  }

  private discardInterpreter(): void {
    const cached = this.cached;
    this.cached = undefined;
    if (cached !== undefined) this.dispose(cached.interpreter);
  }

  private dispose(interpreter: Interpreter): void {
    try {
      interpreter.dispose();
    } catch {
      // QuickJS aborts when a runtime still holds objects: the instance is unusable, replace it.
      this.replaceInstance();
    }
  }

  /**
   * Drops the current WebAssembly instance (and every interpreter in it; its memory goes with it)
   * for the spare, and loads the next spare. Without a spare ready, requests wait for the load
   * (answered 503 if it fails).
   */
  private replaceInstance(): void {
    this.cached = undefined;
    this.instancesReplaced++;
    this.quickjs = this.spare;
    this.spare = undefined;
    if (this.reloading !== undefined) return;
    this.reloading = loadQuickJs().then(
      (quickjs) => {
        if (this.quickjs === undefined) this.quickjs = quickjs;
        else this.spare = quickjs;
        this.reloading = undefined;
      },
      () => {
        this.reloading = undefined;
      },
    );
  }
}

function sameOptions(a: RuntimeOptions, b: RuntimeOptions): boolean {
  return a.heapBytesMax === b.heapBytesMax && a.stackBytesMax === b.stackBytesMax && a.executionTimeMsMax === b.executionTimeMsMax;
}

/** The WebAssembly instance is being replaced after a failure. */
export class EngineUnavailable extends Error {
  constructor() {
    super('the application engine is restarting after a failure; retry shortly');
    this.name = 'EngineUnavailable';
  }
}
