/**
 * The synchronous channel between the main thread's JsEngine (src/gov/sandbox.ts) and the worker
 * thread that runs QuickJS (src/gov/sandbox-worker.ts).
 *
 * Governance evaluates member JavaScript inside a KV transaction, which never awaits, so the main
 * thread cannot wait for the worker through its event loop. Each side instead posts a message on a
 * MessagePort, raises its peer's flag in a SharedArrayBuffer and notifies it; the peer sleeps in
 * `Atomics.wait` on its flag (the main thread with a timeout: what is left of the request's time
 * budget) and takes the message with `receiveMessageOnPort`. Exactly one message is in flight at a
 * time (a request and its answer, or a host-function call and its answer), so the queue of each
 * port holds at most one message.
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

/** Why a sandboxed evaluation failed; the message is meant for the member who wrote the script. */
export type SandboxFailureKind = 'Syntax' | 'Exception' | 'Timeout' | 'OutOfMemory' | 'StackOverflow' | 'MissingExport' | 'BadValue' | 'Unavailable';

/** Index in the shared flags of the flag the main thread waits on (the worker raises it). */
export const FLAG_TO_MAIN = 0;
/** Index of the flag the worker waits on while a host function runs on the main thread. */
export const FLAG_TO_WORKER = 1;
/** Raised once by the worker when its QuickJS instance is loaded and it takes requests. */
export const FLAG_STARTED = 2;
export const FLAG_COUNT = 3;

/**
 * The little of WebAssembly used here: the compiler's libraries declare WebAssembly only with the
 * DOM, which this project does not load.
 */
export interface WasmModule {
  readonly __wasmModule?: never;
}
export interface WasmApi {
  compile(bytes: Uint8Array): Promise<WasmModule>;
  readonly Memory: new (descriptor: { initial: number; maximum: number }) => unknown;
}
export const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

/** What the worker needs for its QuickJS instance and interpreter limits of one evaluation. */
export interface WorkerData {
  readonly port: MessagePort;
  readonly flags: Int32Array;
  /** Compiled once on the main thread, so a replacement worker starts without recompiling. */
  readonly wasmModule: WasmModule;
  /** Maximum size of the engine's WebAssembly memory (its whole heap, not only QuickJS's count). */
  readonly wasmMemoryBytesMax: number;
}

export interface InterpreterLimits {
  readonly memoryBytesMax: number;
  readonly stackBytesMax: number;
}

export type ToWorker =
  | {
      readonly type: 'open';
      readonly session: number;
      readonly source: string;
      readonly filename: string;
      readonly prelude: string | undefined;
      readonly hostNames: readonly string[];
      readonly limits: InterpreterLimits;
      /** `performance.timeOrigin + performance.now()` after which the interpreter interrupts itself. */
      readonly deadlineEpochMs: number;
    }
  | { readonly type: 'has'; readonly session: number; readonly name: string }
  | { readonly type: 'call'; readonly session: number; readonly name: string; readonly argsJson: readonly (string | undefined)[]; readonly deadlineEpochMs: number }
  | { readonly type: 'close'; readonly session: number }
  | { readonly type: 'hostAnswer'; readonly text: string | undefined }
  | { readonly type: 'hostError'; readonly name: string; readonly message: string };

export type ToMain =
  | { readonly type: 'opened' }
  | { readonly type: 'has'; readonly isFunction: boolean }
  /** `json` is the JSON text of the result, undefined for `undefined`. */
  | { readonly type: 'returned'; readonly json: string | undefined }
  /**
   * `hitLimit`: the interpreter stopped at one of its limits, `fatal`: the engine itself failed;
   * in both cases the worker is never used again.
   */
  | { readonly type: 'failed'; readonly kind: SandboxFailureKind; readonly message: string; readonly hitLimit: boolean; readonly fatal: boolean }
  | { readonly type: 'host'; readonly name: string; readonly args: readonly string[] };

/** Posts `message` and wakes the peer waiting on `flagIndex`. */
export function postAndNotify(port: MessagePort, flags: Int32Array, flagIndex: number, message: ToWorker | ToMain): void {
  port.postMessage(message);
  Atomics.store(flags, flagIndex, 1);
  Atomics.notify(flags, flagIndex);
}

/**
 * Takes the next message from `port`, sleeping on `flagIndex` until one arrives or the local
 * monotonic clock (`performance.now()`) reaches `untilMs` (undefined: no limit); undefined when
 * the time ran out. The queue is read before each sleep and after each wake-up, so a message
 * posted between the two is never missed.
 */
export function waitForMessage<T>(port: MessagePort, flags: Int32Array, flagIndex: number, untilMs: number | undefined): T | undefined {
  for (;;) {
    const received = receiveMessageOnPort(port);
    if (received !== undefined) return received.message as T;
    const remainingMs = untilMs === undefined ? Number.POSITIVE_INFINITY : untilMs - performance.now();
    if (remainingMs <= 0) return undefined;
    Atomics.wait(flags, flagIndex, 0, remainingMs);
    Atomics.store(flags, flagIndex, 0);
  }
}
