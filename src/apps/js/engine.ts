/**
 * The application engine: each installed bundle runs in a V8 isolate of its own (interpreter.ts,
 * through `isolated-vm`) on the node's thread, so that a handler runs synchronously inside its KV
 * transaction, with the runtime options in force (docs/apps.md).
 *
 * The interpreter of the current bundle is kept between requests (its modules are compiled and
 * evaluated once); it is rebuilt when the bundle or the runtime options change, and after a request
 * that hit a limit. V8's code cache of the bundle's modules outlives the interpreter: a rebuilt one
 * compiles from it.
 */
import { parseBundle, BundleError, type AppBundle } from './bundle.js';
import { createHost, type RequestScope } from './host.js';
import { Interpreter, ScriptFailure, type CodeCache, type RuntimeOptions } from './interpreter.js';
import { missingEngineNodeFlags } from './node-flags.js';
import {
  DEFAULT_EXECUTION_TIME_MS_MAX,
  DEFAULT_HEAP_BYTES_MAX,
  DEFAULT_STACK_BYTES_MAX,
  EXECUTION_TIME_MS_MAX_LIMIT,
  HEAP_BYTES_MAX_LIMIT,
  HEAP_BYTES_MAX_MIN,
  STACK_BYTES_MAX_LIMIT,
} from './limits.js';

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

/** An interpreter and what it was built for. */
interface CachedInterpreter {
  readonly source: object;
  readonly options: RuntimeOptions;
  readonly interpreter: Interpreter;
}

export class AppEngine {
  private cached: CachedInterpreter | undefined;
  /** The code cache of the installed bundle (`source` is its stored record). */
  private codeCache: { readonly source: object; readonly modules: CodeCache } | undefined;
  private scope: RequestScope | undefined;
  private readonly host = createHost(() => this.scope);
  /** Interpreters built so far (a rebuild after a limit counts). */
  interpretersBuilt = 0;

  private constructor() {}

  /** Refused in a process started without ENGINE_NODE_FLAGS (node-flags.ts says why). */
  static load(): Promise<AppEngine> {
    const missing = missingEngineNodeFlags();
    if (missing.length > 0) {
      return Promise.reject(new Error(`the application engine needs Node.js started with ${missing.join(' ')} (covenant's own launchers pass it: docs/apps.md)`));
    }
    return Promise.resolve(new AppEngine());
  }

  /**
   * Checks a bundle as set_js_app carries it: its shape, that every module compiles, and that
   * every endpoint's module evaluates and exports its function. Throws a BundleError naming the
   * module, function or key at fault.
   */
  checkBundle(value: unknown): AppBundle {
    const bundle = parseBundle(value);
    const interpreter = new Interpreter(bundle, CHECK_RUNTIME_OPTIONS, this.host);
    try {
      interpreter.compileAll();
      for (const endpoint of bundle.endpoints) {
        try {
          interpreter.checkFunction(endpoint.properties.js_module, endpoint.properties.js_function);
        } catch (e) {
          if (!(e instanceof ScriptFailure)) throw e;
          const where = `metadata.endpoints."${endpoint.path}".${endpoint.method.toLowerCase()}`;
          throw new ScriptFailure(e.kind, `${where}: ${e.message}`);
        }
      }
    } catch (e) {
      if (e instanceof ScriptFailure) throw new BundleError(e.message);
      throw e;
    } finally {
      interpreter.dispose();
    }
    return bundle;
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
      // Stopped at a limit, or failed for a reason not the script's: its state cannot be trusted.
      if (!(e instanceof ScriptFailure) || e.hitLimit) this.discardInterpreter();
      throw e;
    } finally {
      this.scope = undefined;
    }
  }

  /** Figures for GET /node/js_metrics. */
  cachedInterpreter(): { options: RuntimeOptions; bytecodeBytes: number; bytecodeUsed: boolean; usedBytes: number } | undefined {
    const cached = this.cached;
    if (cached === undefined) return undefined;
    const { interpreter } = cached;
    return { options: cached.options, bytecodeBytes: interpreter.bytecodeBytes, bytecodeUsed: interpreter.bytecodeUsed, usedBytes: interpreter.memoryUsage().usedBytes };
  }

  private interpreterFor(source: object, bundle: AppBundle, options: RuntimeOptions): Interpreter {
    const cached = this.cached;
    if (cached !== undefined && cached.source === source && sameOptions(cached.options, options)) return cached.interpreter;
    this.discardInterpreter();
    if (this.codeCache?.source !== source) {
      // Another bundle: the previous one's cache is freed now, not whenever V8 collects its handles.
      for (const { data } of this.codeCache?.modules.values() ?? []) data.release();
      this.codeCache = { source, modules: new Map() };
    }
    const interpreter = new Interpreter(bundle, options, this.host, this.codeCache.modules);
    this.interpretersBuilt++;
    this.cached = { source, options, interpreter };
    return interpreter;
  }

  private discardInterpreter(): void {
    const cached = this.cached;
    this.cached = undefined;
    cached?.interpreter.dispose();
  }
}

function sameOptions(a: RuntimeOptions, b: RuntimeOptions): boolean {
  return a.heapBytesMax === b.heapBytesMax && a.stackBytesMax === b.stackBytesMax && a.executionTimeMsMax === b.executionTimeMsMax;
}
