/**
 * The node layer's limits, named with their unit or qualifier last, and the relations between them
 * that the code relies on, asserted when this module loads (a change that breaks one fails at once,
 * in every test, rather than as a rare stall under load).
 */
import { assert } from '../base/assert.js';
import { DEFAULT_UNCOMMITTED_VERSIONS_MAX } from '../kv/index.js';
import { DEFAULT_MAX_FRAME_BYTES, MAX_ENTRY_BYTES } from '../base/channels.js';
import { ELECTION_TIMEOUT_DEFAULT_MS, WAITING_WORK_SIZE_MIN_BYTES } from '../config/index.js';
import { SANDBOX_REQUEST_TIME_MS_MAX, WORKER_START_WAIT_MS_MAX } from '../gov/index.js';

/** Consensus runs on ticks of this length (election and heartbeat timeouts are counted in ticks). */
export const tickDurationMs = 10;

/**
 * Uncommitted entries the primary's consensus core holds, counting the transactions still in the
 * framing pipeline (checkProposal counts them): beyond it new transactions are refused (503
 * TooManyPendingTransactions) until commit catches up.
 */
export const consensusUncommittedEntriesMax = 50_000;

/** Entries and bytes of one append batch to a backup. */
export const appendBatchEntriesMax = 1000;
export const appendBatchBytesMax = 4 * 1024 * 1024;

/**
 * Store versions a restarting node replays beyond its commit before it compacts: replay applies
 * entries without consensus, so it bounds the store's uncommitted history itself.
 */
export const replayUncommittedVersionsMax = 50_000;

/**
 * Replicated signatures a backup verifies at once off its request thread (src/node/signature-checks.ts);
 * beyond it the next is verified on the request thread as it is applied.
 */
export const signatureChecksInFlightMax = 64;

/** Rounds of Ready handling in one pump: each round may produce more work, and one pump must end. */
export const pumpRoundsMax = 1000;

/** Write-set bytes in the framing pipeline from which a signature due by its delay waits for the worker. */
export const signatureWaitsForBytesMin = 256 * 1024;
export const signatureWaitPollMs = 5;

/**
 * Largest private write set a primary sends to backups in clear beside its entry (Entry.sidecar),
 * so that they apply it without decrypting it: AES-GCM costs a backup a cipher set-up per entry,
 * several times the cost of receiving the same bytes again over the channel. The node-to-node
 * channel is mutually authenticated TLS between nodes that all hold the ledger secret. Larger
 * write sets are decrypted (their cipher set-up is small beside their size, and a batch of them
 * must stay within the frame limit).
 */
export const sidecarBytesMax = 64 * 1024;

/** Bytes of recently proposed entries (and their sidecars) a primary keeps for resending. */
export const recentProposalsBytesMax = 16 * 1024 * 1024;

/** COSE signatures over recent committed roots the service keeps (receipts are asked for recent transactions). */
export const signedRootCacheEntriesMax = 16;

/**
 * Merkle blocks (1024 leaves, 32 KiB each) whose leaves, re-read from the ledger files for a
 * receipt of a compacted transaction, stay cached: receipts are often asked for neighbouring
 * transactions, and re-reading a block of large entries costs seconds of a disk and a core.
 */
export const rebuiltBlocksCachedMax = 64;

/**
 * Blocks re-read at once for receipts (each on the leaf reader, off the request thread); a
 * receipt that needs one more answers 503 ReceiptRebuildsBusy with Retry-After, so that
 * unauthenticated receipt requests cannot queue unbounded disk work.
 */
export const blockRebuildsConcurrentMax = 2;
export const blockRebuildsBusyRetryAfterSeconds = 1;

/** How often, at least, the primary looks for silent Pending nodes (spec: at least once per minute). */
export const pendingCleanupIntervalMsMax = 60_000;

/*
 * Join requests (POST /node/join). In virtual mode a quote proves nothing, so anyone reaching an
 * RPC interface can have a node recorded: what one request may record, how many nodes may wait as
 * Pending, and how often one client address may ask are all bounded.
 */

/** Bytes of a join request's node_data as JSON: it is recorded in the node table for every joiner, Pending ones included. */
export const joinNodeDataBytesMax = 16 * 1024;
/** RPC interfaces a join request may announce. */
export const joinRpcInterfacesMax = 16;
/** Characters of an RPC interface name, and of an operator feature name. */
export const joinNameCharsMax = 64;
/** Operator features one announced interface may list (three exist). */
export const joinOperatorFeaturesMax = 8;
/** Characters of an announced address (host:port; a DNS name is at most 253 characters). */
export const joinAddressCharsMax = 300;
/** Characters of one subject alternative name a joiner asks its certificate to carry. */
export const joinSubjectAltNameCharsMax = 300;
/**
 * Nodes the service holds as Pending at once: a new node's join beyond it is refused (503
 * TooManyPendingNodes) until members trust or remove some, or the pending-node cleanup drops silent ones.
 */
export const pendingNodesMax = 64;
/**
 * Join requests per second one client address may send (a token bucket, refilled at this rate up
 * to the burst); beyond, 429 TooManyJoinRequests. A Pending node polls once per join.retry_timeout
 * (100 ms at the shortest the tests use) and a restarting node announces itself once.
 */
export const joinRequestsPerAddressPerSecond = 10;
export const joinRequestsPerAddressBurst = 20;
/** Client addresses whose join rate the primary tracks (the least recently seen is forgotten first). */
export const joinRateAddressesMax = 1024;

// The store refuses new versions beyond DEFAULT_UNCOMMITTED_VERSIONS_MAX uncommitted ones. Consensus
// must refuse first (with a retryable 503), counting what is still being framed: a refusal by the
// store after consensus accepted would be an assertion in the middle of the write path.
assert(
  consensusUncommittedEntriesMax < DEFAULT_UNCOMMITTED_VERSIONS_MAX,
  'consensus bounds uncommitted entries (framing included) below the store bound on uncommitted versions',
);
assert(replayUncommittedVersionsMax < DEFAULT_UNCOMMITTED_VERSIONS_MAX, 'replay compacts before the store bound');
// An append batch of several entries holds at most appendBatchBytesMax of frames, and each frame's
// sidecar is no larger than the frame's own ciphertext: with both, a batch fits one channel frame.
// A batch of one entry (up to MAX_ENTRY_BYTES) carries no sidecar (sidecarBytesMax is far below it).
assert(2 * appendBatchBytesMax < DEFAULT_MAX_FRAME_BYTES, 'a batch of entries with their sidecars fits one node-to-node frame');
assert(sidecarBytesMax < appendBatchBytesMax && MAX_ENTRY_BYTES < DEFAULT_MAX_FRAME_BYTES, 'one entry alone fits one frame');
assert(pendingCleanupIntervalMsMax <= 60_000, 'pending-node cleanup runs at least once per minute');
assert(joinRequestsPerAddressBurst >= joinRequestsPerAddressPerSecond, 'a burst admits at least one second of requests');
assert(joinRequestsPerAddressPerSecond >= 1, 'a Pending node polling once a second is never refused on its own');

/** Writes that may wait at once for their commit on one node (x-covenant-consistency: committed). */
export const commitWaitersMax = 10_000;
/** How long such a write waits before it is answered 503 CommitWaitTimedOut (under the forwarding timeout). */
export const commitWaitTimeoutMs = 8_000;
/** How long a backup waits for the primary's answer to a request it forwarded (then 503 ForwardingTimedOut). */
export const forwardedRequestTimeoutMs = 10_000;
/**
 * How often a backup with forwarded requests waiting checks that the node they went to is still
 * the primary: once another is elected they are answered 503 PrimaryChanged, not at the timeout.
 */
export const forwardedPrimaryCheckMs = 250;
// A committed write forwarded by a backup gets the primary's own answer (CommitWaitTimedOut
// included), not the backup's timeout: the primary answers first, with room for the round trip.
assert(commitWaitTimeoutMs + 1_000 <= forwardedRequestTimeoutMs, 'a commit wait ends before the forwarder gives up on it');
assert(forwardedPrimaryCheckMs < forwardedRequestTimeoutMs / 10, 'a change of primary is noticed long before the timeout');
// Member JavaScript holds the primary's event loop for its budget (heartbeats late by a third of
// an election timeout at worst), plus a worker start at worst: under an election timeout, or the
// backups would elect another primary meanwhile (src/gov/sandbox.ts).
assert(3 * SANDBOX_REQUEST_TIME_MS_MAX <= ELECTION_TIMEOUT_DEFAULT_MS, 'member JavaScript\'s budget is at most a third of the default election timeout');
assert(SANDBOX_REQUEST_TIME_MS_MAX + WORKER_START_WAIT_MS_MAX < ELECTION_TIMEOUT_DEFAULT_MS, 'a budget and a worker start together stay under the default election timeout');

/**
 * Entries, and bytes of frames, read from the ledger at once when a recovery reads it (between two
 * yields to the event loop), and when consensus reads the persisted log as it is created.
 */
export const recoveryReadBatchEntriesMax = 4096;
export const recoveryReadBatchBytesMax = 8 * 1024 * 1024;
/** How often a long ledger read logs its progress. */
export const recoveryProgressIntervalMs = 2_000;

/** Linearizable reads (x-covenant-consistency: linearizable) that may wait at once on one node, the primary. */
export const linearizableReadsMax = 10_000;
/**
 * How long such a read may wait for the primary to confirm it still leads a majority and for its
 * commit to reach the read's seqno before it is answered 503 ReadNotConfirmed (under the
 * forwarding timeout, 10 s, so that a forwarded read gets this answer rather than a timeout).
 */
export const linearizableReadTimeoutMs = 5_000;

/**
 * How often a node looks at the expiry of the certificates it serves (its own and the service's),
 * besides when a renewal is installed: certificates live for days, an hour is early enough.
 */
export const certificateExpiryCheckIntervalMs = 60 * 60 * 1000;
/**
 * A node warns in its log when a certificate it serves has less than this share of its validity
 * period left, or less than certificateExpiryWarningMsMax (a year-long certificate warns a week
 * ahead, a day-long one eight hours ahead): members need that long to agree on a renewal.
 */
export const certificateExpiryWarningFraction = 1 / 3;
export const certificateExpiryWarningMsMax = 7 * 24 * 60 * 60 * 1000;
assert(certificateExpiryCheckIntervalMs < certificateExpiryWarningFraction * 24 * 60 * 60 * 1000, 'a one-day certificate is checked at least once inside its warning window');
/*
 * Waiting work: every client request from the moment its head is read until it is answered (its
 * body, what it waits on: a linearizable read's confirmation, a write's commit, the primary's
 * answer to a forward), and every request a backup forwarded to this primary, counted in bytes
 * against one node-wide budget (config: max_waiting_work_size). Beyond it, new requests are answered
 * 503 WaitingWorkBudgetExhausted at once, before any handler runs, rather than held: a flood of
 * reads or writes waiting for the primary would otherwise grow the process (by 250 to 450 MB) and
 * slow every other client down.
 */

/** Default of max_waiting_work_size. */
export const waitingWorkBytesDefault = 64 * 1024 * 1024;
/** The smallest budget a configuration may set: one request of the largest head and a small body. */
export const waitingWorkBytesMin = WAITING_WORK_SIZE_MIN_BYTES;
/**
 * What one waiting request is counted beyond its bytes, an estimate on the generous side: the
 * request and response objects, the route context and its closures, the waiter's entry.
 */
export const waitingRequestOverheadBytes = 4 * 1024;
/**
 * Factor on a request head's bytes: Node keeps the raw header list and the parsed header object,
 * and the request context a third view of the ones a handler reads.
 */
export const waitingRequestHeadFactor = 2;
/** Largest request head Node's HTTP parser accepts (its default --max-http-header-size). */
export const requestHeadBytesMax = 16 * 1024;
/**
 * The share of the budget one holder (a client address, or a backup forwarding to the primary)
 * may take: one address flooding the node cannot refuse every other client.
 */
export const waitingWorkShareOfOneHolder = 0.5;
/** Retry-After of a refusal for want of budget: the waiting work is typically answered within a second. */
export const waitingWorkRetryAfterSeconds = 1;

/**
 * Requests one client connection may have in flight (read, not yet answered; HTTP/1.1 pipelining)
 * by default (rpc_interfaces.*.max_pipelined_requests). At the limit the node stops reading the
 * connection until half of them are answered; a request that still arrives beyond it (sent in the
 * same packet) is answered 503 TooManyPipelinedRequests and the connection closed.
 */
export const pipelinedRequestsPerSessionDefault = 32;

/*
 * Request rate per client address (rpc_interfaces.*.max_requests_per_second_per_address): the
 * waiting-work budget bounds the memory a flood holds, not the CPU it costs. A flood of cheap
 * requests at a high rate, answered as fast as they come, took every other client's turn (1 to 2.5
 * s of latency for them). Beyond its rate an address is answered 429 TooManyRequests and its
 * connection is not read until its bucket refills. Loopback addresses are exempt by default
 * (request_rate_exempt_addresses): the sandbox and the benchmarks run every client from there.
 */

/**
 * Default rate: a busy remote client (a service's backend sending a thousand requests a second)
 * is not refused, yet a single address can take only a fraction of a node's capacity (tens of
 * thousands of small requests a second on a core).
 */
export const requestsPerSecondPerAddressDefault = 1000;
/** Default burst, in seconds of the rate: a client may catch up after a pause this long. */
export const requestBurstPerAddressFactor = 2;
/** Client addresses whose rate one interface tracks (the least recently seen is forgotten first). */
export const requestRateAddressesMax = 4096;
/**
 * Client addresses not rate-limited by default: the loopback ones (a sandbox, the benchmarks and
 * the node host's own tools connect from there; a process on the node's host can do the node
 * more harm than by flooding it).
 */
export const requestRateExemptAddressesDefault: readonly string[] = ['127.0.0.1', '::1'];

/** Requests a backup may have waiting for the primary's answer at once (503 TooManyForwardedRequests beyond). */
export const forwardedRequestsPendingMax = 10_000;

assert(waitingWorkBytesDefault >= waitingWorkBytesMin, 'the default budget is allowed');
assert(waitingWorkShareOfOneHolder > 0 && waitingWorkShareOfOneHolder < 1, 'one holder takes some of the budget, never all of it');
assert(
  waitingWorkBytesMin * waitingWorkShareOfOneHolder >= 4 * (waitingRequestHeadFactor * requestHeadBytesMax + waitingRequestOverheadBytes),
  'the smallest budget admits a few requests of the largest head at once from one address',
);
// Budget, not counts, is what refuses a flood of requests with large heads: the count caps stay
// the bound for small ones (each costs at least the overhead).
assert(
  waitingWorkBytesDefault / waitingRequestOverheadBytes >= Math.min(linearizableReadsMax, commitWaitersMax),
  'the default budget admits at least as many header-less waiters as the count caps',
);
assert(forwardedRequestsPendingMax >= pipelinedRequestsPerSessionDefault, 'a backup can forward one whole pipeline');
assert(requestBurstPerAddressFactor >= 1, 'the default burst admits at least one second of requests');
assert(
  requestsPerSecondPerAddressDefault * requestBurstPerAddressFactor >= pipelinedRequestsPerSessionDefault,
  'a client that pipelines a whole connection at once is not refused by the default rate',
);
assert(requestRateAddressesMax >= 1024, 'the addresses tracked exceed what a handful of attackers hold, so a flooding address stays tracked');
/**
 * Request work one turn of the event loop may do (src/http/turn-budget.ts): once a turn has started
 * requestsPerTurnMax requests or spent requestTurnMs since its first, the rest wait for later turns,
 * so that node-to-node messages and consensus ticks are never held behind thousands of requests
 * (160 connections of pipelined committed writes once cost a primary its view). A committed write
 * costs 50 to 200 µs of a loaded core: 256 of them fill about the time bound.
 */
export const requestsPerTurnMax = 256;
export const requestTurnMs = 20;

/**
 * Verdicts kept on the committed snapshots a node serves (one per file version): far above
 * files_cleanup.max_snapshots' default (10), so that a node serving its snapshots checks each once.
 */
export const servedSnapshotVerdictsMax = 256;

/**
 * A joiner that gets the same refusal this many times in a row (an invalid snapshot, the same
 * failed download) stops and says why: repeating the same failure forever helps no operator.
 */
export const joinIdenticalFailuresMax = 10;
assert(joinIdenticalFailuresMax >= 3, 'a joiner retries a failure that may be transient at least twice');
/**
 * The longest a node's event loop may be held by one piece of its own work (one turn), whatever
 * the size of the state: a fraction of the election timeout's 1 s default, so that a primary busy
 * with a snapshot or a long read still answers its backups in time. The event-loop delay monitor
 * (GET /node/metrics, `event_loop`) reports how close a node comes to it.
 */
export const eventLoopTurnMsBound = 50;
/**
 * A snapshot's packing (src/kv/snapshot-slices.ts) yields the event loop once it has spent
 * snapshotSliceMs in one turn or packed snapshotSliceEntriesMax entries, checking the time every
 * snapshotSliceCheckEntries entries. Packing an entry copies its key and value: about 1.5 µs for a
 * 200-byte record on an idle core here, several times that on a loaded one, so the time bound is
 * the one that holds a turn short on a busy machine and the entry bound the one that does on an
 * idle one (and in the simulator, whose clock stands still during a turn).
 */
export const snapshotSliceMs = 10;
export const snapshotSliceEntriesMax = 8192;
export const snapshotSliceCheckEntries = 256;
/**
 * Snapshots a node holds that are still being written or whose evidence it has not yet seen:
 * the primary marks no new snapshot point while it holds one (so snapshots are never taken faster
 * than they are written), and a backup that falls further behind skips the next one (it keeps
 * joining and serving from the others).
 */
export const snapshotsUnevidencedMax = 2;
/**
 * Loading a snapshot (src/kv/snapshot-loading.ts, at start and at join) follows the same slices as
 * packing one (snapshotSliceMs, snapshotSliceEntriesMax, a look at the clock every
 * snapshotSliceCheckEntries entries decoded); while it hashes or deciphers the file it looks at the
 * clock every snapshotLoadCheckBytes. SHA-256 and AES-GCM run at several hundred MB/s on a core
 * here, so 64 KiB is well under a millisecond even on a loaded one.
 */
export const snapshotLoadCheckBytes = 64 * 1024;
/**
 * A snapshot's store of at most this size is loaded in the turn that needs it rather than in
 * slices, so that a start-up flow continues without yielding (a young service's snapshots, the
 * simulator's, which hold little more than the governance tables). Decoding costs about 1.5 µs an
 * entry on an idle core here (20 µs on a loaded one), and an entry takes at least 10 bytes: 64 KiB
 * is at most ~6,500 entries, ~10 ms idle; a real 64 KiB snapshot (the constitution is ~25 KB of
 * it) has far fewer.
 */
export const snapshotLoadAtOnceBytesMax = 64 * 1024;
/**
 * A node checking a snapshot before serving it hashes this much of the file per turn: SHA-256 runs
 * at several hundred MB/s on a core here, so 1 MiB is a few ms (a 200 MB snapshot, 200 turns).
 */
export const snapshotDigestSliceBytes = 1 << 20;
/**
 * A restarting node replays its ledger (src/node/restart-slices.ts) in slices of snapshotSliceMs or
 * at most this many entries (the bound that ends a slice in the simulator, whose clock stands still
 * during a turn). Replaying an entry costs a few µs to 30 µs (a small write set; a large one, a
 * few ms); the clock is looked at after every entry.
 */
export const replaySliceEntriesMax = 4096;
/**
 * A restarting node reads its startup snapshot's file this much per turn (a copy out of the page
 * cache, a few ms), before hashing it snapshotDigestSliceBytes per turn.
 */
export const snapshotFileReadSliceBytes = 8 << 20;
/**
 * The snapshot writer (src/ledger/snapshot-writer.ts) encodes, enciphers, writes and reads back a
 * snapshot this much at a time: what it holds besides the packed state (one piece, and its
 * ciphertext while the private section is written), instead of a second copy of the whole
 * snapshot. A few MiB make each write and each cipher call large enough to cost no more than one
 * big one (64 writes for a 256 MB snapshot).
 */
export const snapshotWritePieceBytes = 4 << 20;
assert(snapshotWritePieceBytes >= 1 << 20 && snapshotWritePieceBytes <= 8 << 20, 'a snapshot write piece is large enough for few syscalls and small beside a snapshot');
assert(snapshotSliceMs < eventLoopTurnMsBound / 2, 'a slice of a snapshot fits well within the turn bound');
assert(snapshotSliceCheckEntries * 0.02 < eventLoopTurnMsBound - snapshotSliceMs, 'between two looks at the clock a slice cannot overrun the turn bound (even at 20 µs per entry)');
assert(snapshotSliceCheckEntries <= snapshotSliceEntriesMax, 'a slice checks the clock before its entry bound');
assert(snapshotsUnevidencedMax >= 1, 'a node can hold the snapshot it is writing');
assert(requestTurnMs < eventLoopTurnMsBound / 2, 'a turn of requests fits well within the turn bound');
assert(requestsPerTurnMax >= pipelinedRequestsPerSessionDefault, 'one connection\'s whole pipeline can run in one turn');
assert((snapshotDigestSliceBytes / 50e6) * 1000 < eventLoopTurnMsBound, 'a slice of a digest fits within the turn bound (even at 50 MB/s)');
assert((snapshotLoadCheckBytes / 50e6) * 1000 < eventLoopTurnMsBound - snapshotSliceMs, 'between two looks at the clock a load cannot overrun the turn bound (even at 50 MB/s)');
assert((snapshotFileReadSliceBytes / 1e9) * 1000 < eventLoopTurnMsBound - snapshotSliceMs, 'a slice of a file read fits within the turn bound (even at 1 GB/s from the page cache)');
assert(replaySliceEntriesMax * 0.002 < eventLoopTurnMsBound, 'a replay slice of small entries fits the turn bound on an idle core (even at 2 µs per entry)');

/**
 * Committed writes whose stages one primary times at once (src/node/write/commit-stages.ts): more
 * than the connections of a benchmark, so that every write of one is timed, not only the first
 * of each round; beyond it, a write waits untimed.
 */
export const commitStageTracesMax = 256;
assert(commitStageTracesMax <= commitWaitersMax, 'no more traced writes than writes that may wait');
