/**
 * Limits of hosted JavaScript applications (docs/apps.md). Names carry their unit last; each says
 * why it is what it is. The runtime options members set (set_js_runtime_options) are bounded by
 * the default constitution; these are the service's own bounds around them.
 */
import { assert } from '../../base/assert.js';

/** Modules of one bundle: an application is a handful of files; thousands would be a mistake or an attack. */
export const BUNDLE_MODULES_MAX = 1000;
/** Endpoints (path × method) of one bundle: each is a route matched on every /app request. */
export const BUNDLE_ENDPOINTS_MAX = 1000;
/** Longest module name and endpoint path: names appear in errors, logs and /node/api. */
export const BUNDLE_NAME_CHARS_MAX = 256;

/** Defaults of the runtime options while members set none (set_js_runtime_options). */
export const DEFAULT_HEAP_BYTES_MAX = 64 * 1024 * 1024;
/**
 * Small on purpose, as the constitution's: under WebAssembly some native recursions use much more
 * host stack than the interpreter counts, and a host stack overflow must never happen.
 */
export const DEFAULT_STACK_BYTES_MAX = 256 * 1024;
/**
 * A handler runs on the node's event loop, synchronously inside its transaction: while it runs,
 * the node sends no heartbeat. 100 ms is a tenth of the default election timeout (1000 ms).
 */
export const DEFAULT_EXECUTION_TIME_MS_MAX = 100;

/** The largest values set_js_runtime_options accepts (the default constitution checks the same). */
export const HEAP_BYTES_MAX_LIMIT = 256 * 1024 * 1024;
export const STACK_BYTES_MAX_LIMIT = 1024 * 1024;
export const EXECUTION_TIME_MS_MAX_LIMIT = 1000;

/**
 * The whole WebAssembly memory of the application engine: twice the largest heap, because the
 * interpreter's own count misses part of what it allocates; this bound holds whatever it counts.
 * WebAssembly memory grows on demand: the maximum costs nothing until used.
 */
export const ENGINE_MEMORY_BYTES_MAX = 2 * HEAP_BYTES_MAX_LIMIT;

/** Entries a handler may visit with forEach in one call: the entries are copied into the sandbox. */
export const FOR_EACH_ENTRIES_MAX = 100_000;
/** Bytes covenant.crypto.randomBytes gives in one call. */
export const RANDOM_BYTES_MAX = 65_536;
/** Longest exception message answered to a client (the start of a long message is what helps). */
export const EXCEPTION_MESSAGE_CHARS_MAX = 1000;

assert(DEFAULT_HEAP_BYTES_MAX <= HEAP_BYTES_MAX_LIMIT, 'the default heap fits the largest allowed');
assert(DEFAULT_STACK_BYTES_MAX <= STACK_BYTES_MAX_LIMIT, 'the default stack fits the largest allowed');
assert(DEFAULT_EXECUTION_TIME_MS_MAX <= EXECUTION_TIME_MS_MAX_LIMIT, 'the default time fits the largest allowed');
assert(ENGINE_MEMORY_BYTES_MAX >= 2 * HEAP_BYTES_MAX_LIMIT, 'the engine memory holds the largest heap with room for what the interpreter does not count');
