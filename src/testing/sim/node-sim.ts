/**
 * The production node under the seeded simulator: N real CovenantNode compositions (driver,
 * replica, proposer, signatures, peers, flows — the code that runs in `covenant node`), each on
 * its own in-memory disk, wired to a simulated network (SimFrameNetwork: seeded loss,
 * duplication, delay, partitions) and to one manual clock, with consensus randomness from the
 * seed. A client writes to whichever node is primary; nodes crash (their process ends: timers and
 * frames gone, files as written) and restart from their own ledger and node state, with the
 * configuration they were started with.
 *
 * Checkers run after every step: one primary per view; committed entries identical on every node
 * (bytes of the ledger entry at each committed seqno, signatures included, so the signed Merkle
 * roots agree); commit lands on signatures and never goes back on a live node. A liveness phase
 * heals the network, restarts every node and requires a new write to commit everywhere; then the
 * committed chunk files must be byte-identical and the Merkle roots equal on every node.
 *
 * Set-up (identities and certificates, which the crypto library makes asynchronously) happens
 * before the seeded run; the run itself is synchronous, so it is a function of its seed. ECDSA
 * signatures are randomised, which changes the entries' sizes, hence where ledger chunks end: the
 * simulated disks' timing does not depend on it (scheduleSyncs), but a node that restarts takes
 * its commit from its last committed chunk, so a run in which a node restarts while its commit is
 * inside a chunk may still differ there from another run of its seed.
 */
import { isCovenantError, utf8 } from '../../base/index.js';
import type { Clock } from '../../base/clock.js';
import { nullLogger, type Logger } from '../../base/log.js';
import type { NodeConfig } from '../../config/index.js';
import { createSelfSignedCertificate, generateEcKeyPair, loadPublicKey, nodeIdFromPublicKey, publicKeyDer, sha256Hex, verifyEcdsa, type KeyPair, type SignatureVerifier } from '../../crypto/index.js';
import { EntryFlags, decodeEntry, hasFlag, parseSnapshotFileName } from '../../ledger/index.js';
import { CovenantNode, type NodeAddresses } from '../../node/node.js';
import type { JoinClient } from '../../node/join.js';
import { ManualClock } from '../manual-clock.js';
import { MemoryDisk } from '../memory-disk.js';
import { Prng } from '../prng.js';
import { SimTables } from './sim-tables.js';
import { rawConfigOf, simConfig, writeFile } from './node-sim-config.js';
import { Violation } from './checker.js';
import { SimFrameNetwork, type SimNodeChannels } from './node-network.js';

export interface NodeSimOptions {
  readonly seed: number;
  readonly nodes: number;
  /** Steps of the fault phase (one step: deliver due frames, then 10 ms of clock). */
  readonly steps: number;
  /** Steps the liveness phase may take to commit a new write everywhere. */
  readonly livenessStepsMax: number;
  /** ledger.durability of every node (default Synced). */
  readonly durability?: 'Synced' | 'Replicated';
  /** Probability per step that every node loses power at once (unsynced writes lost). Default 0. */
  readonly powerCutProbability?: number;
  /** snapshots.tx_count of every node (default 1,000,000: no snapshots). */
  readonly snapshotTxCount?: number;
}

export interface NodeSimReport {
  readonly seed: number;
  readonly writes: number;
  readonly refusedWrites: number;
  readonly crashes: number;
  readonly restarts: number;
  readonly partitions: number;
  readonly powerCuts: number;
  readonly views: number;
  readonly committedSeqno: number;
  readonly frames: { readonly delivered: number; readonly dropped: number };
  /** What happened, in order: primaries by view, crashes, restarts, partitions, commit every 100 steps. */
  readonly trace: readonly string[];
}

const STEP_MS = 10;
/** Turns of the event loop an asynchronous start-up flow may take while the clock stands still. */
const SETTLE_TURNS_MAX = 100_000;

/** Lets every pending promise callback run (a macrotask turn: the microtask queue is drained before it). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export interface SimHost {
  readonly name: string;
  readonly index: number;
  readonly disk: MemoryDisk;
  /** The configuration the node was started with; a restart runs it again (it resumes from its own state). */
  readonly startConfig: NodeConfig;
  readonly addresses: NodeAddresses;
  node: CovenantNode | undefined;
  channels: SimNodeChannels | undefined;
  /** Bumped at each crash: the timers and deferred work of an ended process never run. */
  generation: number;
  /** Committed seqnos of this node already compared with the others. */
  checkedSeqno: number;
  nodeId: string;
  /** The node's key: node ids sort in the order of the hosts (consensus orders peers by id). */
  keys: KeyPair | undefined;
  /** The node's last fail or fatal log line (the log is otherwise discarded): a stuck phase says why. */
  lastFailure?: string;
}

/** Discards the log but keeps the last fail or fatal line in `host.lastFailure`. */
function failureRecorder(host: SimHost): Logger {
  const keep = (msg: string) => void (host.lastFailure = msg);
  const logger: Logger = { ...nullLogger, fail: keep, fatal: keep, child: () => logger, tag: () => logger };
  return logger;
}

export class NodeSim {
  readonly clock = new ManualClock(1_700_000_000_000);
  readonly rng: Prng;
  readonly network: SimFrameNetwork;
  readonly hosts: SimHost[] = [];
  readonly trace: string[] = [];
  protected readonly primaryOfView = new Map<number, string>();
  protected readonly committed = new Map<number, string>();
  protected readonly failures: string[] = [];
  step = 0;
  writes = 0;
  refusedWrites = 0;
  crashes = 0;
  restarts = 0;
  partitions = 0;
  powerCuts = 0;
  /** Ledger syncs take seeded time (scheduleSyncs) once set-up is over. */
  protected syncDelays = false;

  constructor(readonly options: NodeSimOptions) {
    this.rng = new Prng(options.seed);
    this.network = new SimFrameNetwork(this.rng.split(), { lossProbability: 0.02, duplicateProbability: 0.02, minDelayTicks: 0, maxDelayTicks: 3 });
    for (let i = 0; i < options.nodes; i++) this.hosts.push(this.hostFor(i, `n${i}`, this.configFor(i, i === 0 ? 'Start' : 'Join'), undefined));
  }

  /** The configuration host `index` starts with (a scenario adds its own sections). */
  protected configFor(index: number, type: 'Start' | 'Join'): NodeConfig {
    return simConfig(rawConfigOf(index, type, this.options.durability ?? 'Synced', this.options.snapshotTxCount));
  }

  /** Starts the service on n0 and joins the others while it opens (asynchronous: certificates). */
  async setUp(): Promise<void> {
    const keys = this.hosts.map(() => generateEcKeyPair('P-384')).sort((a, b) => (nodeIdFromPublicKey(a.publicKey) < nodeIdFromPublicKey(b.publicKey) ? -1 : 1));
    this.hosts.forEach((h, i) => (h.keys = keys[i]));
    const first = this.hosts[0]!;
    // A scenario may have written its own members.
    if (!first.disk.exists('/sim/n0/member0_cert.pem')) {
      const member = generateEcKeyPair('P-384');
      writeFile(first.disk, '/sim/n0/member0_cert.pem', await createSelfSignedCertificate({ keyPair: member, subjectCommonName: 'member0', validityDays: 1, isCa: false }));
    }
    await this.launch(first, first.startConfig);
    const serviceCert = utf8.decode(first.disk.readAll('/sim/n0/service_cert.pem'));
    for (const host of this.hosts.slice(1)) {
      writeFile(host.disk, `/sim/n${host.index}/service_cert.pem`, serviceCert);
      await this.launch(host, host.startConfig);
    }
    this.syncDelays = true;
  }

  protected clockFor(host: SimHost): Clock {
    const generation = host.generation;
    const shared = this.clock;
    const live = () => host.generation === generation;
    return {
      nowMs: () => shared.nowMs(),
      monotonicMs: () => shared.monotonicMs(),
      setTimer: (delayMs, fn) => shared.setTimer(delayMs, () => live() && fn()),
      defer: (fn) => shared.defer(() => live() && fn()),
    };
  }

  protected randomBytes(rng: Prng): (n: number) => Uint8Array {
    return (n) => {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = rng.nextUint32() & 0xff;
      return out;
    };
  }

  /**
   * How long each ledger sync of `host` takes: seeded, on the simulated clock, none while start-up
   * work settles with the clock standing still. A ledger sync covers each chunk file still open,
   * and which are open depends on where chunks end, hence on the entries' sizes, which the
   * randomised ECDSA signatures in them change from run to run: so one time is drawn for every
   * file sync started at the same instant (the files of one ledger sync end together), never one
   * per file, and the run does not depend on how many files there were. n0, the first primary, has
   * the slowest disk (up to four steps, its backups up to one), so that backups' syncs often end
   * before the primary's own.
   */
  protected scheduleSyncs(host: SimHost, clock: Clock): void {
    // Its own generator: the course of the run's other choices does not depend on how many syncs there were.
    const rng = new Prng(this.options.seed * 1009 + host.index * 101 + host.generation);
    const maxMs = host.index === 0 ? 4 * STEP_MS : STEP_MS;
    let last: { atMs: number; delayMs: number } | undefined;
    host.disk.syncScheduler = (_path, complete) => {
      if (!this.syncDelays) return void clock.setTimer(0, complete);
      const atMs = clock.monotonicMs();
      if (last?.atMs !== atMs) last = { atMs, delayMs: rng.int(0, maxMs) };
      clock.setTimer(last.delayMs, complete);
    };
  }

  /**
   * How `host` verifies its primary's signatures while their entries sync: at once, with the
   * verdict delivered after a delay drawn from the seed, the host and the signature's seqno (not
   * from a running generator: how many signatures a run holds may vary, see scheduleSyncs), none
   * while start-up work settles. Up to two steps: a verification may end before or after the sync
   * of its entry, in either order with the next one's.
   */
  protected signatureVerifier(host: SimHost, clock: Clock): SignatureVerifier {
    const generation = host.generation;
    return {
      verify: (seqno, key, root, signature, done) => {
        let outcome: boolean | Error;
        try {
          outcome = verifyEcdsa(key, root, signature, 'der');
        } catch (e) {
          outcome = e as Error;
        }
        const delayMs = this.syncDelays ? new Prng(this.options.seed * 7919 + host.index * 131 + generation * 17 + seqno).int(0, 2 * STEP_MS) : 0;
        clock.setTimer(delayMs, () => done(outcome));
      },
    };
  }

  protected createNode(host: SimHost, config: NodeConfig): CovenantNode {
    const disk = host.disk;
    const clock = this.clockFor(host);
    this.scheduleSyncs(host, clock);
    return new CovenantNode({
      config,
      disk,
      logger: failureRecorder(host),
      clock,
      randomBytes: this.randomBytes(this.rng.split()),
      version: 'sim',
      readTextFile: (path) => utf8.decode(disk.readAll(path)),
      writeTextFile: (path, text) => writeFile(disk, path, text),
      writeSecretFile: (path, text) => writeFile(disk, path, text),
      ...(host.keys ? { identityKeyPair: host.keys } : {}),
      signatureVerifier: this.signatureVerifier(host, clock),
    });
  }

  /** A join client that hands the request to the node at the target address, as the HTTP layer would. */
  protected joinClient(): JoinClient {
    return {
      postJoin: async (target, request) => {
        const host = this.hosts.find((h) => h.addresses.rpc[0]!.publishedAddress === target);
        if (host?.node === undefined) throw Object.assign(new Error(`${target} is down`), { code: 'ECONNREFUSED' });
        try {
          // The joiner's own node-to-node address stands for the remote address of its connection.
          const body = await host.node.handleJoin(request, publicKeyDer(loadPublicKey(request.public_key)), request.node_to_node_interface.published_address);
          return { status: 200, body };
        } catch (e) {
          if (isCovenantError(e)) return { status: e.status, body: e.toBody() };
          throw e;
        }
      },
      // GET /node/snapshot?since= on the target, then the snapshot it names: the newest committed one.
      fetchSnapshot: async (target, since) => {
        const host = this.hosts.find((h) => h.addresses.rpc[0]!.publishedAddress === target);
        if (host?.node === undefined) throw Object.assign(new Error(`${target} is down`), { code: 'ECONNREFUSED' });
        const directory = host.node.init.config.snapshots.directory;
        let newest: { name: string; seqno: number; evidenceSeqno: number } | undefined;
        for (const name of host.disk.exists(directory) ? host.disk.listDirectory(directory) : []) {
          const parsed = parseSnapshotFileName(name);
          if (!parsed?.committed || parsed.seqno <= since) continue;
          if (newest === undefined || parsed.seqno > newest.seqno || (parsed.seqno === newest.seqno && parsed.evidenceSeqno > newest.evidenceSeqno)) newest = { name, ...parsed };
        }
        return newest === undefined ? undefined : { name: newest.name, bytes: host.disk.readAll(host.disk.join(directory, newest.name)) };
      },
    };
  }

  /** A host at `127.0.0.<index + 1>` on a fresh disk, with nothing started. */
  hostFor(index: number, name: string, startConfig: NodeConfig, keys: KeyPair | undefined): SimHost {
    const address = `127.0.0.${index + 1}`;
    return {
      name,
      index,
      disk: new MemoryDisk(),
      startConfig,
      addresses: {
        rpc: [{ name: 'primary', bindAddress: `${address}:443`, publishedAddress: `${address}:443`, enabledOperatorFeatures: [] }],
        nodeToNode: { bindAddress: `${address}:444`, publishedAddress: `${address}:444` },
      },
      node: undefined,
      channels: undefined,
      generation: 0,
      checkedSeqno: 0,
      nodeId: '',
      keys,
    };
  }

  /**
   * A new node joins the service through `target` (from the target's newest committed snapshot
   * when the target itself started from one), with `raw` as its configuration; `prepare` may put
   * files on its disk first (a snapshot to start from). The join settles while the clock stands still.
   */
  async addJoiner(index: number, target: SimHost, raw: Record<string, any>, options: { keys?: KeyPair; prepare?: (host: SimHost) => void } = {}): Promise<SimHost> {
    raw.command.join.target_rpc_address = target.addresses.rpc[0]!.publishedAddress;
    const host = this.hostFor(index, `j${index}`, simConfig(raw), options.keys);
    writeFile(host.disk, host.startConfig.command.service_certificate_file, utf8.decode(target.disk.readAll(target.startConfig.command.service_certificate_file)));
    options.prepare?.(host);
    this.hosts.push(host);
    await this.withoutTime(`${host.name} joins`, this.launch(host, host.startConfig), host);
    return host;
  }

  /**
   * Settles `work` (a start-up flow: certificates are made asynchronously, a ledger read yields on
   * timers of no delay) while the clock stands still and no frame moves, so that where the run
   * goes on does not depend on how many turns the asynchronous work took.
   */
  async withoutTime(what: string, work: Promise<unknown>, host?: SimHost): Promise<void> {
    const delays = this.syncDelays;
    this.syncDelays = false;
    try {
      await this.settleWithoutTime(what, work, host);
    } finally {
      this.syncDelays = delays;
    }
  }

  private async settleWithoutTime(what: string, work: Promise<unknown>, host?: SimHost): Promise<void> {
    let done = false;
    let failed: unknown;
    work.then(
      () => (done = true),
      (e: unknown) => ((failed = e), (done = true)),
    );
    for (let turn = 0; !done; turn++) {
      if (turn > SETTLE_TURNS_MAX) {
        throw new Violation('liveness', `${what}: not settled without time passing${host?.lastFailure ? ` (its last failure: ${host.lastFailure})` : ''}`);
      }
      this.clock.advance(0);
      await settle();
    }
    if (failed !== undefined) throw new Violation('invariant', `${what}: ${String(failed)}`);
  }

  /** Starts the node of `host` (a new process) for the first time: identity and certificates are made asynchronously. */
  protected async launch(host: SimHost, config: NodeConfig): Promise<void> {
    const node = this.createNode(host, config);
    host.node = node;
    await node.prepareIdentity();
    this.attach(host, node);
    await node.start(host.addresses, config.command.type === 'Join' ? this.joinClient() : undefined, () => undefined);
  }

  protected attach(host: SimHost, node: CovenantNode): void {
    host.nodeId = node.nodeId;
    host.channels = this.network.join(node.nodeId);
    node.attachChannels(host.channels);
  }

  /**
   * The process of `host` ends: no stop, no sync. What it wrote stays on its disk — unless the
   * machine lost power, when each file keeps only what was synced (and a torn part of the rest).
   */
  crash(host: SimHost, powerLoss = false): void {
    if (host.node === undefined) return;
    host.generation++;
    void host.channels?.close();
    host.node = undefined;
    host.channels = undefined;
    if (powerLoss) host.disk.crash();
    this.crashes++;
    this.trace.push(`t=${this.step} ${powerLoss ? 'power loss' : 'crash'} ${host.name}`);
  }

  /** A crashed node starts again on its own ledger and state; the restart flow runs synchronously. */
  restart(host: SimHost): void {
    if (host.node !== undefined) return;
    host.generation++;
    const node = this.createNode(host, host.startConfig);
    if (!node.restoreIdentity()) throw new Violation('invariant', `${host.name} has no node state to restart from`);
    host.node = node;
    this.attach(host, node);
    // The restart flow runs synchronously up to announcing the node's addresses (which waits on the
    // network and resolves after the run); a failure of it is a finding of the run.
    const client = host.startConfig.command.type === 'Join' ? this.joinClient() : undefined;
    node.start(host.addresses, client, () => undefined).catch((e: unknown) => this.failures.push(`${host.name}: restart failed: ${String(e)}`));
    if (node.parts.driver.raft === undefined) throw new Violation('invariant', `${host.name} did not restart from its ledger`);
    this.restarts++;
    this.trace.push(`t=${this.step} restart ${host.name}`);
  }

  /** One client write through whichever live node is primary (each of several "primaries" may be asked). */
  protected write(): void {
    const primaries = this.hosts.filter((h) => h.node?.isPrimary());
    if (primaries.length === 0) return;
    const host = this.rng.pick(primaries);
    const key = `k${this.rng.int(0, 9)}`;
    const value = `${this.step}:${this.writes}`;
    try {
      host.node!.executeWrite((tx) => {
        tx.table(SimTables.records).put(key, value);
        tx.table(SimTables.publicRecords).put(key, value);
      });
      this.writes++;
    } catch (e) {
      if (!isCovenantError(e) || !['NotPrimary', 'TooManyPendingTransactions'].includes(e.code)) throw e;
      this.refusedWrites++;
    }
  }

  protected injectFaults(): void {
    const rng = this.rng;
    const live = this.hosts.filter((h) => h.node !== undefined);
    const majority = Math.floor(this.hosts.length / 2) + 1;
    if (rng.chance(0.004) && live.length > majority) this.crash(rng.pick(live));
    const primary = live.find((h) => h.node?.isPrimary());
    if (rng.chance(0.002) && primary !== undefined && live.length > majority) this.crash(primary);
    // A power cut of every node at once: what a majority acknowledged must have been on disk.
    if (rng.chance(this.options.powerCutProbability ?? 0)) {
      this.powerCuts++;
      for (const host of live) this.crash(host, true);
    }
    const dead = this.hosts.filter((h) => h.node === undefined);
    if (dead.length > 0 && rng.chance(0.01)) this.restart(rng.pick(dead));
    if (!this.network.partitioned && rng.chance(0.003)) {
      const isolated = rng.pick(this.hosts);
      this.network.partition([isolated.nodeId], this.hosts.filter((h) => h !== isolated).map((h) => h.nodeId));
      this.partitions++;
      this.trace.push(`t=${this.step} partition ${isolated.name}`);
    } else if (this.network.partitioned && rng.chance(0.01)) {
      this.network.heal();
      this.trace.push(`t=${this.step} heal`);
    }
  }

  /** One step: faults, client writes, delivery of due frames, 10 ms of clock; then the checkers. */
  advance(faults: boolean): void {
    this.step++;
    this.network.nowTicks = this.step;
    if (faults) this.injectFaults();
    if (this.rng.chance(0.5)) this.write();
    this.network.deliverDue();
    this.clock.advance(STEP_MS);
    this.check();
    if (this.step % 100 === 0) this.trace.push(`t=${this.step} commit ${Math.max(0, ...this.hosts.map((h) => h.node?.parts.replica.commitSeqno ?? 0))}`);
  }

  /**
   * A step, then the promise work it started settles (a restarted node's announcement, a join
   * answer): only promise callbacks run there, no real I/O or timer, so the run stays a function of
   * its seed.
   */
  async advanceSettled(faults: boolean): Promise<void> {
    this.advance(faults);
    await settle();
  }

  /** The safety checkers, after every step. */
  check(): void {
    if (this.failures.length > 0) throw new Violation('invariant', this.failures.join('; '));
    for (const host of this.hosts) {
      const node = host.node;
      if (node === undefined) continue;
      const summary = node.parts.driver.raft?.summary();
      if (summary?.role === 'Primary') {
        const known = this.primaryOfView.get(summary.view);
        if (known === undefined) {
          this.primaryOfView.set(summary.view, host.name);
          this.trace.push(`t=${this.step} view ${summary.view} primary ${host.name}`);
        } else if (known !== host.name) {
          throw new Violation('one-primary-per-view', `view ${summary.view} has primaries ${known} and ${host.name}`);
        }
      }
      this.checkCommitted(host);
    }
  }

  /** Every committed entry of `host` equals what every other node committed at that seqno, and commit lands on a signature. */
  protected checkCommitted(host: SimHost): void {
    const replica = host.node!.parts.replica;
    const commit = replica.commitSeqno;
    if (commit <= host.checkedSeqno) return;
    // A node that started from a snapshot without the ledger before it holds no entry up to it.
    const first = replica.ledger.firstSeqno > 1 ? Math.max(replica.ledger.firstSeqno, replica.startupSeqno + 1) : 1;
    if (commit < first) return;
    for (let seqno = Math.max(host.checkedSeqno + 1, first); seqno <= commit; seqno++) {
      const digest = sha256Hex(replica.ledger.getEntry(seqno));
      const known = this.committed.get(seqno);
      if (known === undefined) this.committed.set(seqno, digest);
      else if (known !== digest) throw new Violation('committed-never-lost', `${host.name} committed other bytes at seqno ${seqno} than another node`);
    }
    if (!hasFlag(decodeEntry(replica.ledger.getEntry(commit)).flags, EntryFlags.SIGNATURE)) {
      throw new Violation('commit-on-signature', `${host.name} committed up to ${commit}, which is not a signature`);
    }
    host.checkedSeqno = commit;
  }

  /**
   * Steps without faults until the set-up (the service, the joins) is committed on every node: a
   * power cut before that may lose joins the joiners already counted on, and they never come back.
   */
  async establish(stepsMax = 500): Promise<void> {
    const target = this.hosts[0]!.node!.parts.replica.ledger.lastSeqno;
    for (let i = 0; i < stepsMax; i++) {
      await this.advanceSettled(false);
      if (this.committedEverywhere(target)) return;
    }
    throw new Violation('liveness', `the set-up (seqno ${target}) was not committed on every node within ${stepsMax} steps`);
  }

  /** Heals everything, writes once more, and requires that write committed on every node; then compares files and roots. */
  async checkLiveness(): Promise<void> {
    this.network.heal();
    this.network.faults = { lossProbability: 0, duplicateProbability: 0, minDelayTicks: 0, maxDelayTicks: 2 };
    for (const host of this.hosts) this.restart(host);
    let target: number | undefined;
    for (let i = 0; i < this.options.livenessStepsMax; i++) {
      if (target === undefined) {
        const primary = this.hosts.find((h) => h.node?.isPrimary());
        target = primary?.node?.executeWrite((tx) => tx.table(SimTables.records).put('final', this.step)).txId?.seqno;
      }
      await this.advanceSettled(false);
      if (target !== undefined && this.committedEverywhere(target)) {
        // A few more steps so that every node has applied the same signature.
        for (let j = 0; j < 50; j++) await this.advanceSettled(false);
        this.compareFiles();
        return;
      }
    }
    throw new Violation('liveness', `a write did not commit on every node within ${this.options.livenessStepsMax} steps of a healed network (target seqno ${target})`);
  }

  private committedEverywhere(seqno: number): boolean {
    return this.hosts.every((h) => (h.node?.parts.replica.commitSeqno ?? 0) >= seqno);
  }

  /** Committed chunk files of the same name are byte-identical on every node; Merkle roots agree at the same version. */
  private compareFiles(): void {
    const [first, ...others] = this.hosts;
    const filesOf = (host: SimHost) => {
      const directory = host.startConfig.ledger.directory;
      return new Map(host.disk.listDirectory(directory).filter((n) => n.endsWith('.committed')).map((n) => [n, sha256Hex(host.disk.readAll(host.disk.join(directory, n)))]));
    };
    const reference = filesOf(first!);
    for (const host of others) {
      for (const [name, digest] of filesOf(host)) {
        const known = reference.get(name);
        if (known !== undefined && known !== digest) throw new Violation('committed-never-lost', `committed chunk ${name} differs between ${first!.name} and ${host.name}`);
      }
    }
    const versions = new Set(this.hosts.map((h) => h.node!.parts.replica.store.version));
    if (versions.size === 1) {
      const roots = new Set(this.hosts.map((h) => h.node!.treeRootHex()));
      if (roots.size !== 1) throw new Violation('committed-never-lost', 'nodes at the same version have different Merkle roots');
    }
  }

  stopAll(): void {
    for (const host of this.hosts) {
      host.generation++;
      host.node?.stop();
      void host.channels?.close();
      host.node = undefined;
    }
  }

  report(): NodeSimReport {
    return {
      seed: this.options.seed,
      writes: this.writes,
      refusedWrites: this.refusedWrites,
      crashes: this.crashes,
      restarts: this.restarts,
      partitions: this.partitions,
      powerCuts: this.powerCuts,
      views: this.primaryOfView.size,
      committedSeqno: Math.max(0, ...this.committed.keys()),
      frames: { delivered: this.network.deliveredFrames, dropped: this.network.droppedFrames },
      trace: this.trace,
    };
  }
}

/** A whole run: set-up, the fault phase, the liveness phase. Throws a Violation (with the seed) on a broken property. */
export async function runNodeSim(options: NodeSimOptions): Promise<NodeSimReport> {
  const sim = new NodeSim(options);
  try {
    await sim.setUp();
    try {
      if ((options.powerCutProbability ?? 0) > 0) await sim.establish();
      for (let i = 0; i < options.steps; i++) await sim.advanceSettled(true);
      await sim.checkLiveness();
    } catch (e) {
      if (e instanceof Violation) e.message = `seed ${options.seed}, step ${sim.step}: ${e.message}\n${sim.trace.slice(-30).join('\n')}`;
      throw e;
    }
    return sim.report();
  } finally {
    sim.stopAll();
  }
}
