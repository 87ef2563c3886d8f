/**
 * The JavaScript sandbox for constitutions, ballots and join policies (docs/architecture.md, decision 10): QuickJS
 * compiled to WebAssembly (quickjs-emscripten, sync variant), so code from members runs in a separate
 * engine with its own heap and no access to the host: no `process`, `require`, file system, network
 * or timers exist inside it, only what a caller passes in as host functions.
 *
 * The engine runs on a worker thread (src/gov/sandbox-worker.ts) that the caller drives
 * synchronously (src/gov/sandbox-protocol.ts): evaluation happens inside a KV transaction, which
 * never awaits (docs/architecture.md, decision 2). The caller's thread sleeps while member code runs and wakes for
 * each host-function call, which it runs itself, in order, inside its transaction.
 *
 * Limits:
 * - time: all member JavaScript of one request shares one wall-clock budget (`SandboxBudget`). The
 *   caller's thread never waits for the worker past its end: it terminates the worker and fails the
 *   evaluation with a Timeout, even when the script is inside a long built-in that the interpreter's
 *   own interrupt check cannot stop;
 * - memory: the interpreter's heap limit, and a cap on the worker's whole WebAssembly memory
 *   (`WASM_MEMORY_BYTES_MAX`), which the interpreter cannot exceed even where its own count of
 *   allocations falls short; the worker's own V8 heap is limited too;
 * - stack: the interpreter's stack limit.
 * A worker whose evaluation hit a limit is terminated (which returns its memory to the system) and a
 * fresh one is started at once, ready for the next request.
 *
 * Every evaluation gets a fresh context (fresh globals, fresh module table), so nothing a ballot
 * does is visible to the next one. Values cross the boundary as JSON text, parsed and serialised
 * with the context's own JSON functions captured before any user code runs (so a script that
 * replaces `JSON.parse` only fools itself).
 */
import { readFile } from 'node:fs/promises';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { CovenantError } from '../base/errors.js';
import { FLAG_COUNT, FLAG_STARTED, FLAG_TO_MAIN, FLAG_TO_WORKER, postAndNotify, waitForMessage, type SandboxFailureKind, type ToMain, type ToWorker, type WorkerData, wasm, type WasmModule } from './sandbox-protocol.js';

export type { SandboxFailureKind } from './sandbox-protocol.js';

export interface SandboxLimits {
  /** Heap of the interpreter (its own count; the WebAssembly memory is capped separately). */
  readonly memoryBytesMax: number;
  /**
   * Wall-clock time for all member JavaScript of one request together (module evaluations, every
   * exported function call and the host functions they call), unless the caller passes its own
   * `SandboxBudget`.
   */
  readonly executionTimeMsMax: number;
  /**
   * Interpreter stack. Kept small on purpose: under WebAssembly some native recursions (e.g.
   * JSON.stringify of a deeply nested value) use much more host stack than the interpreter
   * accounts for, and a host stack overflow must never happen (it would poison the engine).
   */
  readonly stackBytesMax: number;
}

/**
 * Time budget of all member JavaScript of one request. The primary's event loop is blocked for
 * that long at most (plus one host-function call), so it must stay well under the default
 * `consensus.election_timeout` (1000 ms): at 300 ms, a primary running member code still sends its
 * heartbeats (every `consensus.message_timeout`, 100 ms by default) late by a third of an election
 * timeout at worst, and no backup starts an election.
 */
export const SANDBOX_REQUEST_TIME_MS_MAX = 300;

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  memoryBytesMax: 32 * 1024 * 1024,
  executionTimeMsMax: SANDBOX_REQUEST_TIME_MS_MAX,
  stackBytesMax: 64 * 1024,
};

/**
 * The worker's whole WebAssembly memory. Twice the default interpreter heap: the interpreter's
 * count misses part of what it allocates (an array filled element by element grows the memory past
 * its limit), and this is the bound that holds whatever it counts.
 */
export const WASM_MEMORY_BYTES_MAX = 64 * 1024 * 1024;

/**
 * How long a call waits, synchronously, for a worker that is still starting (after a previous
 * one was discarded; a start takes some 50 ms). Not counted against the member's budget, but
 * bounded: past it the request answers 503 SandboxUnavailable and the worker keeps starting for the
 * next one. With the time budget, the event loop waits 550 ms at worst, about half the default
 * election timeout. Requests through the HTTP frontend await `JsEngine.ready()` before their
 * transaction, so they rarely wait here at all.
 */
export const WORKER_START_WAIT_MS_MAX = 250;

/** V8 heap of the worker: its glue code and the JSON texts crossing (at most 4 MiB each). */
const WORKER_OLD_GENERATION_MB_MAX = 64;
const WORKER_YOUNG_GENERATION_MB_MAX = 8;

export class SandboxError extends CovenantError {
  constructor(
    readonly kind: SandboxFailureKind,
    message: string,
  ) {
    super(kind === 'Unavailable' ? 'SandboxUnavailable' : 'SandboxFailure', message, kind === 'Unavailable' ? 503 : 400, { kind });
    this.name = 'SandboxError';
  }
}

/**
 * The wall-clock time left to the member JavaScript of one request. The clock starts when member
 * code first runs; every evaluation and call of the request draws on the same budget.
 */
export class SandboxBudget {
  private deadlineMs: number | undefined;

  constructor(
    readonly timeMsMax: number,
    private readonly monotonicMs: () => number = () => performance.now(),
  ) {}

  /** The `performance.now()` instant at which the budget ends (fixed on first use). */
  deadline(): number {
    this.deadlineMs ??= this.monotonicMs() + this.timeMsMax;
    return this.deadlineMs;
  }

  remainingMs(): number {
    return this.deadline() - this.monotonicMs();
  }

  /** Gives back time the member is not answerable for (waiting for a worker to start). */
  giveBack(ms: number): void {
    if (this.deadlineMs !== undefined) this.deadlineMs += ms;
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
  /** The request's budget, shared by all its evaluations; by default this evaluation gets its own. */
  readonly budget?: SandboxBudget;
}

export interface JsEngineOptions {
  /** The QuickJS WebAssembly module, compiled once and shared by every worker. */
  readonly wasmModule: WasmModule;
  readonly wasmMemoryBytesMax?: number;
  readonly startWaitMsMax?: number;
}

interface EngineWorker {
  readonly worker: Worker;
  readonly port: MessagePort;
  readonly flags: Int32Array;
  /** Settles when the worker has loaded QuickJS (rejects if it ends first). */
  readonly started: Promise<void>;
  /** Terminated, ended or discarded: never used again. */
  gone: boolean;
  /** Why it ended, when it ended by itself. */
  failure: string | undefined;
}

const WORKER_URL = new URL('./sandbox-worker.js', import.meta.url);

/**
 * One QuickJS engine on a worker thread. Load it once (asynchronously) with `loadJsEngine`; after
 * that every evaluation is synchronous, so it can run inside a KV transaction (docs/architecture.md, decision 2).
 */
export class JsEngine {
  private current: EngineWorker;
  private nextSession = 1;
  /** A host function is running on this thread: the worker waits for its answer, not for a request. */
  private inHostCall = false;

  constructor(private readonly options: JsEngineOptions) {
    this.current = this.spawn();
  }

  /**
   * Resolves once a worker is ready. Callers await it before their transaction begins, so that the
   * synchronous evaluation inside it does not wait for a worker to start.
   */
  async ready(): Promise<void> {
    if (this.current.gone) this.current = this.spawn();
    try {
      await this.current.started;
    } catch (e) {
      throw new SandboxError('Unavailable', `the JavaScript sandbox could not start (${(e as Error).message}); retry shortly`);
    }
  }

  /**
   * Evaluates `source` as an ES module in a fresh context and hands it to `body`, which may call its
   * exports. Everything, including the time `body` spends between calls, draws on one budget. The
   * context is disposed when `body` returns.
   */
  run<T>(options: RunOptions, body: (module: LoadedModule) => T): T {
    if (this.inHostCall) throw new Error('JsEngine.run may not be called from a host function');
    const limits = options.limits ?? DEFAULT_SANDBOX_LIMITS;
    const budget = options.budget ?? new SandboxBudget(limits.executionTimeMsMax);
    const engine = this.startedWorker(budget);
    const host = options.host ?? {};
    const session = this.nextSession++;
    const exchange = (message: ToWorker) => this.exchange(engine, message, host, budget);
    exchange({
      type: 'open',
      session,
      source: options.source,
      filename: options.filename,
      prelude: options.prelude,
      hostNames: Object.keys(host),
      limits: { memoryBytesMax: limits.memoryBytesMax, stackBytesMax: limits.stackBytesMax },
      deadlineEpochMs: performance.timeOrigin + budget.deadline(),
    });
    try {
      const loaded: LoadedModule = {
        hasFunction: (name) => (exchange({ type: 'has', session, name }) as Extract<ToMain, { type: 'has' }>).isFunction,
        call: (name, args) => {
          const answer = exchange({
            type: 'call',
            session,
            name,
            argsJson: args.map((a) => (a === undefined ? undefined : JSON.stringify(a))),
            deadlineEpochMs: performance.timeOrigin + budget.deadline(),
          }) as Extract<ToMain, { type: 'returned' }>;
          return answer.json === undefined ? undefined : (JSON.parse(answer.json) as unknown);
        },
      };
      return body(loaded);
    } finally {
      // Nobody waits for the close: the worker handles it before its next request.
      if (!engine.gone) engine.port.postMessage({ type: 'close', session } satisfies ToWorker);
    }
  }

  /** Syntax and export check of a module without running anything but its top level. */
  checkModule(source: string, filename: string, requiredFunctions: readonly string[], limits?: SandboxLimits, budget?: SandboxBudget): void {
    this.run({ source, filename, ...(limits ? { limits } : {}), ...(budget ? { budget } : {}) }, (module) => {
      for (const name of requiredFunctions) {
        if (!module.hasFunction(name)) throw new SandboxError('MissingExport', `${filename} does not export a function "${name}"`);
      }
    });
  }

  /** False while the worker is being replaced. */
  get available(): boolean {
    return !this.current.gone && Atomics.load(this.current.flags, FLAG_STARTED) === 1;
  }

  /** Terminates the worker (for tests and shutdown); a later call starts a new one. */
  async close(): Promise<void> {
    const engine = this.current;
    engine.gone = true;
    await engine.worker.terminate();
  }

  private spawn(): EngineWorker {
    const { port1, port2 } = new MessageChannel();
    const flags = new Int32Array(new SharedArrayBuffer(FLAG_COUNT * Int32Array.BYTES_PER_ELEMENT));
    const data: WorkerData = {
      port: port2,
      flags,
      wasmModule: this.options.wasmModule,
      wasmMemoryBytesMax: this.options.wasmMemoryBytesMax ?? WASM_MEMORY_BYTES_MAX,
    };
    const worker = new Worker(WORKER_URL, {
      workerData: data,
      transferList: [port2],
      resourceLimits: { maxOldGenerationSizeMb: WORKER_OLD_GENERATION_MB_MAX, maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB_MAX },
    });
    // An idle engine must not keep a process (a CLI command, a test) alive.
    worker.unref();
    const started = new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('exit', (code) => reject(new Error(engine.failure ?? `the sandbox worker ended with status ${code}`)));
    });
    started.catch(() => undefined);
    const engine: EngineWorker = { worker, port: port1, flags, started, gone: false, failure: undefined };
    // Without a listener, an error in the worker would end the whole process.
    worker.on('error', (e: Error) => {
      engine.failure = e.message;
      engine.gone = true;
    });
    worker.on('exit', () => {
      engine.gone = true;
      port1.close();
    });
    return engine;
  }

  /** Terminates a worker that hit a limit, overran or failed, and starts its replacement now. */
  private discard(engine: EngineWorker): void {
    if (!engine.gone) {
      engine.gone = true;
      void engine.worker.terminate();
    }
    if (this.current === engine) this.current = this.spawn();
  }

  /** The current worker once started, waiting for it at most `startWaitMsMax` (given back to the budget). */
  private startedWorker(budget: SandboxBudget): EngineWorker {
    if (this.current.gone) this.current = this.spawn();
    const engine = this.current;
    if (Atomics.load(engine.flags, FLAG_STARTED) === 1) return engine;
    const beganMs = performance.now();
    Atomics.wait(engine.flags, FLAG_STARTED, 0, this.options.startWaitMsMax ?? WORKER_START_WAIT_MS_MAX);
    budget.giveBack(performance.now() - beganMs);
    if (Atomics.load(engine.flags, FLAG_STARTED) !== 1) {
      throw new SandboxError('Unavailable', `the JavaScript sandbox is starting${engine.failure ? ` after a failure (${engine.failure})` : ''}; retry shortly`);
    }
    return engine;
  }

  /**
   * Sends one request to the worker and waits for its answer, running the host-function calls it
   * makes meanwhile. Never waits past the budget: a worker still busy then is terminated.
   */
  private exchange(engine: EngineWorker, message: ToWorker, host: HostFunctions, budget: SandboxBudget): ToMain {
    if (engine.gone) throw new SandboxError('Unavailable', 'the sandbox engine was restarted during this evaluation; retry');
    if (budget.remainingMs() <= 0) throw timeoutError(budget);
    postAndNotify(engine.port, engine.flags, FLAG_TO_WORKER, message);
    for (;;) {
      const answer = waitForMessage<ToMain>(engine.port, engine.flags, FLAG_TO_MAIN, budget.deadline());
      if (answer === undefined) {
        this.discard(engine);
        throw timeoutError(budget);
      }
      if (answer.type === 'host') {
        postAndNotify(engine.port, engine.flags, FLAG_TO_WORKER, this.callHost(host, answer.name, answer.args));
        continue;
      }
      if (answer.type === 'failed') {
        if (answer.hitLimit || answer.fatal) this.discard(engine);
        throw answer.kind === 'Timeout' ? timeoutError(budget) : new SandboxError(answer.kind, answer.message);
      }
      return answer;
    }
  }

  private callHost(host: HostFunctions, name: string, args: readonly string[]): ToWorker {
    const fn = Object.hasOwn(host, name) ? host[name] : undefined;
    if (fn === undefined) return { type: 'hostError', name: 'ReferenceError', message: `${name} is not a host function` };
    this.inHostCall = true;
    try {
      return { type: 'hostAnswer', text: fn(...args) };
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      return { type: 'hostError', name: error.name, message: error.message };
    } finally {
      this.inHostCall = false;
    }
  }
}

function timeoutError(budget: SandboxBudget): SandboxError {
  return new SandboxError('Timeout', `execution time limit exceeded (${budget.timeMsMax} ms for all member JavaScript of one request)`);
}

let shared: Promise<JsEngine> | undefined;

/** The process-wide engine (the WebAssembly module is compiled once, its worker started at once). */
export function loadJsEngine(): Promise<JsEngine> {
  shared ??= (async () => {
    const wasmBytes = await readFile(new URL(import.meta.resolve('@jitl/quickjs-wasmfile-release-sync/wasm')));
    const engine = new JsEngine({ wasmModule: await wasm.compile(wasmBytes) });
    await engine.ready();
    return engine;
  })();
  return shared;
}
