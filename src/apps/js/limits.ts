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

/** Ledger entries the historical cache reads per turn of the event loop: reads are synchronous file reads, so few at once. */
export const HISTORICAL_FETCHES_PER_TURN = 16;
/** Entries waiting to be read for historical requests; beyond it a request needing another is refused (503 HistoricalFetchesBusy, Retry-After). */
export const HISTORICAL_FETCHES_QUEUED_MAX = 1024;
/** Retry-After of a historical request whose entries are being read: they are read within a few turns. */
export const HISTORICAL_RETRY_AFTER_SECONDS = 1;
/** States one historical request may read (covenant.historical.getStateAt): each may cost a ledger read. */
export const HISTORICAL_STATES_PER_REQUEST_MAX = 256;
/** Committed entries an index reads per turn of its loop: each is a synchronous file read and decryption. */
export const INDEX_ENTRIES_PER_TURN = 256;
/** How often the indexing loop runs, in milliseconds (each run reads at most INDEX_ENTRIES_PER_TURN entries). */
export const INDEX_INTERVAL_MS = 10;
/** Seqnos the indexes of a node hold together (about 8 bytes each in arrays, plus their keys): beyond it they stop, reported full. */
export const INDEX_SEQNOS_MAX = 10_000_000;
/** Indexes one bundle declares: each is maintained over every committed entry. */
export const BUNDLE_INDEXES_MAX = 16;
/** Seqnos one covenant.indexing query answers (the audit trail of one key is read in ranges). */
export const INDEX_QUERY_SEQNOS_MAX = 10_000;
/** The smallest max_heap_bytes set_js_runtime_options gives an interpreter (a smaller value is raised to it). */
export const HEAP_BYTES_MAX_MIN = 1024 * 1024;
/**
 * Bytes of keys and values a handler's writes hold in the sandbox before they are handed to the
 * host (at the latest when the handler returns): the buffer is a copy of them in the interpreter's
 * heap, so it stays a fraction of the smallest heap.
 */
export const WRITES_BUFFERED_BYTES_MAX = 256 * 1024;
/** Map objects (covenant.kv[name]) an interpreter keeps by name between requests; beyond it they are dropped and built again. */
export const MAP_OBJECTS_CACHED_MAX = 64;

assert(HISTORICAL_FETCHES_PER_TURN <= HISTORICAL_FETCHES_QUEUED_MAX, 'a turn reads at most the queue');
assert(HISTORICAL_STATES_PER_REQUEST_MAX <= HISTORICAL_FETCHES_QUEUED_MAX, 'one request\'s states fit the fetch queue');
assert(DEFAULT_HEAP_BYTES_MAX <= HEAP_BYTES_MAX_LIMIT, 'the default heap fits the largest allowed');
assert(DEFAULT_STACK_BYTES_MAX <= STACK_BYTES_MAX_LIMIT, 'the default stack fits the largest allowed');
assert(DEFAULT_EXECUTION_TIME_MS_MAX <= EXECUTION_TIME_MS_MAX_LIMIT, 'the default time fits the largest allowed');
assert(HEAP_BYTES_MAX_MIN <= DEFAULT_HEAP_BYTES_MAX, 'the default heap is allowed');
assert(4 * WRITES_BUFFERED_BYTES_MAX <= HEAP_BYTES_MAX_MIN, 'pending writes leave most of the smallest heap to the handler');
assert(ENGINE_MEMORY_BYTES_MAX >= 2 * HEAP_BYTES_MAX_LIMIT, 'the engine memory holds the largest heap with room for what the interpreter does not count');
