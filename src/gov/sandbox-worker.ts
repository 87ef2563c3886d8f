/**
 * The worker thread that runs QuickJS for JsEngine (src/gov/sandbox.ts); the channel is described in
 * src/gov/sandbox-protocol.ts.
 *
 * The engine lives here, and not on the main thread, so that the main thread can give up on it:
 * QuickJS polls its interrupt handler only between bytecode steps, so a script looping over an
 * expensive built-in (`indexOf` over a million elements, `lastIndexOf` over ten million
 * characters) can run for minutes past its deadline. The main thread waits for this worker no
 * longer than the request's time budget and terminates it when it overruns (terminating also frees
 * its WebAssembly memory). The WebAssembly memory is created here with a maximum, because the
 * interpreter's own memory accounting misses part of what it allocates.
 *
 * Each evaluation (`open` ... `close`) gets a fresh context; contexts share one runtime, which holds
 * the interpreter's memory and stack limits. Values cross as JSON text, parsed and serialised with
 * the context's own JSON functions captured before any member code runs.
 */
import { parentPort, workerData } from 'node:worker_threads';
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSSyncVariant,
} from 'quickjs-emscripten-core';
import * as variantModule from '@jitl/quickjs-wasmfile-release-sync';
import {
  FLAG_STARTED,
  FLAG_TO_MAIN,
  FLAG_TO_WORKER,
  postAndNotify,
  waitForMessage,
  wasm,
  type InterpreterLimits,
  type SandboxFailureKind,
  type ToMain,
  type ToWorker,
  type WorkerData,
} from './sandbox-protocol.js';

// The package's types describe its CommonJS build while Node loads its ES build: accept both shapes.
const wasmVariant = ((variantModule as unknown as { default: { default?: QuickJSSyncVariant } & QuickJSSyncVariant }).default.default ??
  (variantModule as unknown as { default: QuickJSSyncVariant }).default) as QuickJSSyncVariant;

/** Largest JSON text a result may have; a bigger one is refused rather than copied to the main thread. */
export const RESULT_TEXT_BYTES_MAX = 4 * 1024 * 1024;
const WASM_PAGE_BYTES = 65536;
/** The emscripten build's own initial memory (16 MiB): the instance needs at least that much. */
const WASM_INITIAL_BYTES = 16 * 1024 * 1024;
/** Reasons cross to the main thread short: the member needs the start of a message, not megabytes. */
const MESSAGE_CHARS_MAX = 1000;

class Failure extends Error {
  constructor(
    readonly kind: SandboxFailureKind,
    message: string,
  ) {
    super(message);
  }
}

interface JsonBridge {
  fromJson(text: string | undefined): QuickJSHandle;
  toJson(handle: QuickJSHandle, where: string): string | undefined;
  dispose(): void;
}

interface Session {
  readonly context: QuickJSContext;
  readonly json: JsonBridge;
  readonly namespace: QuickJSHandle;
  readonly filename: string;
}

const { port, flags, wasmModule, wasmMemoryBytesMax } = workerData as WorkerData;

const send = (message: ToMain) => postAndNotify(port, flags, FLAG_TO_MAIN, message);
const nowEpochMs = () => performance.timeOrigin + performance.now();

const memory = new wasm.Memory({
  initial: WASM_INITIAL_BYTES / WASM_PAGE_BYTES,
  maximum: Math.max(WASM_INITIAL_BYTES, wasmMemoryBytesMax) / WASM_PAGE_BYTES,
});
const quickjs = await newQuickJSWASMModuleFromVariant(newVariant(wasmVariant, { wasmModule: wasmModule as never, wasmMemory: memory as never }));

let runtime: QuickJSRuntime | undefined;
let runtimeLimits: InterpreterLimits | undefined;
let deadlineEpochMs = 0;
const sessions = new Map<number, Session>();

function runtimeFor(limits: InterpreterLimits): QuickJSRuntime {
  if (runtime !== undefined && runtimeLimits?.memoryBytesMax === limits.memoryBytesMax && runtimeLimits.stackBytesMax === limits.stackBytesMax) return runtime;
  if (runtime !== undefined && sessions.size === 0) runtime.dispose();
  // A runtime with open contexts (a nested evaluation with other limits) is left to the worker's end.
  runtime = quickjs.newRuntime();
  runtime.setMemoryLimit(limits.memoryBytesMax);
  runtime.setMaxStackSize(limits.stackBytesMax);
  runtime.setInterruptHandler(() => nowEpochMs() > deadlineEpochMs);
  runtimeLimits = limits;
  return runtime;
}

function handle(message: ToWorker): void {
  try {
    switch (message.type) {
      case 'open': {
        deadlineEpochMs = message.deadlineEpochMs;
        const rt = runtimeFor(message.limits);
        const context = rt.newContext();
        const json = captureJson(context);
        try {
          installHostFunctions(context, message.hostNames);
          if (message.prelude !== undefined) consume(context, context.evalCode(message.prelude, 'prelude.js', { type: 'global', strict: true }));
          const namespace = evaluateModule(context, rt, message.source, message.filename);
          sessions.set(message.session, { context, json, namespace, filename: message.filename });
        } catch (e) {
          json.dispose();
          context.dispose();
          throw e;
        }
        send({ type: 'opened' });
        return;
      }
      case 'has': {
        const session = sessionOf(message.session);
        const fn = session.context.getProp(session.namespace, message.name);
        try {
          send({ type: 'has', isFunction: session.context.typeof(fn) === 'function' });
        } finally {
          fn.dispose();
        }
        return;
      }
      case 'call': {
        deadlineEpochMs = message.deadlineEpochMs;
        const { context, json, namespace, filename } = sessionOf(message.session);
        const where = `${filename}.${message.name}`;
        const fn = context.getProp(namespace, message.name);
        try {
          if (context.typeof(fn) !== 'function') throw new Failure('MissingExport', `${filename} does not export a function "${message.name}"`);
          const argHandles = message.argsJson.map((text) => json.fromJson(text));
          try {
            const value = unwrap(context, context.callFunction(fn, context.undefined, argHandles));
            try {
              send({ type: 'returned', json: json.toJson(value, where) });
            } finally {
              value.dispose();
            }
          } finally {
            for (const h of argHandles) h.dispose();
          }
        } finally {
          fn.dispose();
        }
        return;
      }
      case 'close': {
        const session = sessions.get(message.session);
        if (session === undefined) return; // its open failed: nothing to dispose, nobody waits
        sessions.delete(message.session);
        session.namespace.dispose();
        session.json.dispose();
        session.context.dispose();
        return;
      }
      default:
        throw new Failure('Unavailable', `unexpected message ${message.type} outside a host-function call`);
    }
  } catch (e) {
    if (e instanceof Failure) {
      const hitLimit = e.kind === 'Timeout' || e.kind === 'OutOfMemory' || e.kind === 'StackOverflow';
      send({ type: 'failed', kind: e.kind, message: e.message, hitLimit, fatal: false });
      return;
    }
    // A failure outside the interpreter's own checks (a host stack overflow inside WebAssembly,
    // a trap): the instance's memory may be inconsistent, so the main thread discards this worker.
    send({ type: 'failed', kind: 'Unavailable', message: `the sandbox engine failed (${short((e as Error).message)}); it is being restarted`, hitLimit: false, fatal: true });
  }
}

function sessionOf(id: number): Session {
  const session = sessions.get(id);
  if (session === undefined) throw new Failure('Unavailable', 'this evaluation is no longer open');
  return session;
}

port.on('message', handle);
// Two signals of readiness: the flag for a caller waiting synchronously, a message for one awaiting.
Atomics.store(flags, FLAG_STARTED, 1);
Atomics.notify(flags, FLAG_STARTED);
parentPort?.postMessage('started');

// ------------------------------------------------------------------ helpers

/** Captures the context's pristine JSON.parse / JSON.stringify before member code can replace them. */
function captureJson(context: QuickJSContext): JsonBridge {
  const jsonObject = context.getProp(context.global, 'JSON');
  const parse = context.getProp(jsonObject, 'parse');
  const stringify = context.getProp(jsonObject, 'stringify');
  jsonObject.dispose();
  return {
    fromJson(text) {
      if (text === undefined) return context.undefined;
      const str = context.newString(text);
      try {
        return unwrap(context, context.callFunction(parse, context.undefined, str));
      } finally {
        str.dispose();
      }
    },
    toJson(handle, where) {
      const type = context.typeof(handle);
      if (type === 'undefined') return undefined;
      if (type !== 'object' && type !== 'boolean' && type !== 'number' && type !== 'string') {
        throw new Failure('BadValue', `${where} returned a ${type}, which has no JSON form`);
      }
      const result = context.callFunction(stringify, context.undefined, handle);
      if (result.error) {
        const failure = describeError(context, result.error);
        result.error.dispose();
        throw new Failure(failure.kind, `${where} returned a value that cannot be serialised: ${failure.message}`);
      }
      try {
        if (context.typeof(result.value) !== 'string') throw new Failure('BadValue', `${where} returned a value with no JSON form`);
        const text = context.getString(result.value);
        if (text.length > RESULT_TEXT_BYTES_MAX) throw new Failure('BadValue', `${where} returned more than ${RESULT_TEXT_BYTES_MAX} bytes of JSON`);
        return text;
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

/**
 * Each host function posts its call to the main thread (where the caller's transaction is) and
 * sleeps until the answer: the script sees an ordinary synchronous function. The main thread
 * terminates this worker if it does not answer in time, so the wait needs no limit of its own.
 */
function installHostFunctions(context: QuickJSContext, names: readonly string[]): void {
  for (const name of names) {
    const handle = context.newFunction(name, (...args) => {
      const texts = args.map((a) => (context.typeof(a) === 'string' ? context.getString(a) : String(context.dump(a))));
      send({ type: 'host', name, args: texts });
      const answer = waitForMessage<ToWorker>(port, flags, FLAG_TO_WORKER, undefined)!;
      if (answer.type === 'hostError') {
        // A thrown Error crosses into the VM as an exception with the same name and message.
        const error = new Error(answer.message);
        error.name = answer.name;
        throw error;
      }
      if (answer.type !== 'hostAnswer') throw new Error(`unexpected answer ${answer.type} to a host-function call`);
      return answer.text === undefined ? undefined : context.newString(answer.text);
    });
    context.setProp(context.global, name, handle);
    handle.dispose();
  }
}

function evaluateModule(context: QuickJSContext, rt: QuickJSRuntime, source: string, filename: string): QuickJSHandle {
  const result = context.evalCode(source, filename, { type: 'module', strict: true });
  if (result.error) {
    const failure = describeError(context, result.error);
    result.error.dispose();
    throw new Failure(failure.kind === 'Exception' && failure.name === 'SyntaxError' ? 'Syntax' : failure.kind, `${filename}: ${failure.message}`);
  }
  // Module evaluation may answer a promise of the namespace (top-level await): settle it now.
  const handle = result.value;
  const state = context.getPromiseState(handle);
  if (state.type === 'fulfilled') {
    if (state.notAPromise) return handle;
    handle.dispose();
    return state.value;
  }
  rt.executePendingJobs();
  const settled = context.getPromiseState(handle);
  handle.dispose();
  if (settled.type === 'fulfilled') return settled.value;
  if (settled.type === 'rejected') {
    const failure = describeError(context, settled.error);
    settled.error.dispose();
    throw new Failure(failure.kind, `${filename}: ${failure.message}`);
  }
  throw new Failure('BadValue', `${filename}: module evaluation did not complete (top-level await on something that never settles)`);
}

function unwrap(context: QuickJSContext, result: ReturnType<QuickJSContext['callFunction']>): QuickJSHandle {
  if (!result.error) return result.value;
  const failure = describeError(context, result.error);
  result.error.dispose();
  throw new Failure(failure.kind, failure.message);
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
  const message = short(rawMessage);
  if (name === 'InternalError' && message === 'interrupted') return { kind: 'Timeout', name, message: 'execution time limit exceeded' };
  if (name === 'InternalError' && message === 'stack overflow') return { kind: 'StackOverflow', name, message: 'stack size limit exceeded' };
  if (message === 'out of memory' || (name === 'InternalError' && /out of memory|too long/.test(message))) {
    return { kind: 'OutOfMemory', name, message: `memory limit exceeded (${message})` };
  }
  if (dumped === null) return { kind: 'OutOfMemory', name, message: 'memory limit exceeded' };
  return { kind: 'Exception', name, message: `${name}: ${message}` };
}

function short(text: string): string {
  return text.length > MESSAGE_CHARS_MAX ? `${text.slice(0, MESSAGE_CHARS_MAX)}…` : text;
}

function safeText(value: unknown): string {
  try {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  } catch {
    return String(value);
  }
}
