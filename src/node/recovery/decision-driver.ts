/**
 * The recovery decision protocol on a Recover node (docs/recovery-decision.md): drives the pure
 * RecoveryDecision (src/recovery) with a timer and with the messages the transport delivers, signs
 * what it sends and checks what it receives, and resolves with the decision.
 *
 * Each message travels in an envelope signed with the sender's node key (ECDSA over the UTF-8 of
 * the JSON array [from, to, message, service]), carrying the node's public key and its virtual
 * quote. A receiver takes a message only if the envelope names it as `to`, comes from an expected
 * location, its quote binds the public key, the quote's measurement and host data are trusted by
 * the recovered ledger (the same tables a joiner is checked against), and the signature verifies.
 * The opener's IAmOpen also carries `service`: its RPC address and the new service certificate,
 * which the other nodes join with. Anything else is dropped (and counted in the status line).
 */
import { errorMessage } from '../../base/errors.js';
import type { Clock } from '../../base/clock.js';
import type { Logger } from '../../base/log.js';
import { utf8 } from '../../base/bytes.js';
import { publicKeyDer, verifyEcdsa } from '../../crypto/index.js';
import { verifyVirtualQuote, type QuoteInfo } from '../../attestation/virtual.js';
import { parseDecisionMessage, RecoveryDecision, type Decision, type DecisionMessage, type DecisionOutput, type LedgerPosition } from '../../recovery/index.js';
import type { DecisionTransportHandle, DecisionTransportOptions } from '../api.js';
import type { SealingRecoveryConfig } from '../../config/index.js';

/** How often the protocol's timer ticks, and so how often an unanswered message is sent again. */
export const DECISION_RETRY_INTERVAL_MS = 500;
/** How often an undecided node logs what it waits for. */
export const DECISION_STATUS_LOG_INTERVAL_MS = 10_000;

/** What an opener's IAmOpen tells the others: where to join, and whom to trust. */
export interface OpenedService {
  readonly rpc_address: string;
  readonly service_certificate: string;
}

interface Envelope {
  readonly from: string;
  readonly to: string;
  readonly message: DecisionMessage;
  readonly service?: OpenedService;
  readonly public_key: string;
  readonly quote_info: QuoteInfo;
  readonly signature: string;
}

export interface DecisionDriverHost {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly sealing: SealingRecoveryConfig;
  readonly tls: { readonly keyPem: string; readonly certificatePem: string };
  readonly publicKeyPem: string;
  readonly quoteInfo: QuoteInfo;
  sign(bytes: Uint8Array): Uint8Array;
  /** Whether the recovered ledger trusts this code (measurement and host data). */
  trustsCode(measurement: string, hostData: string): boolean;
  transport(options: DecisionTransportOptions): DecisionTransportHandle;
}

export type DriverDecision = { readonly kind: 'Open'; readonly openKind: 'Election' | 'Failover' } | { readonly kind: 'Join'; readonly target: string; readonly service: OpenedService };

export class DecisionDriver {
  private readonly protocol: RecoveryDecision;
  private readonly transport: DecisionTransportHandle;
  private readonly self: string;
  private readonly addressOf: Map<string, string>;
  private lastTickMs: number;
  private timer: { cancel(): void } | undefined;
  private resolveDecision: ((d: DriverDecision) => void) | undefined;
  private opened: OpenedService | undefined;
  /** A Join decision waits for the IAmOpen envelope that carried the opener's service. */
  private serviceOf = new Map<string, OpenedService>();
  private dropped = 0;
  private readonly refusalsLogged = new Set<string>();
  private lastStatusLogMs = 0;
  private closed = false;

  constructor(
    private readonly host: DecisionDriverHost,
    position: LedgerPosition,
  ) {
    const protocol = host.sealing.recovery_decision_protocol!;
    this.self = host.sealing.location.name;
    this.addressOf = new Map(protocol.expected_locations.map((l) => [l.name, l.address]));
    this.protocol = new RecoveryDecision({
      self: this.self,
      expected: protocol.expected_locations,
      position,
      failoverTimeoutMs: protocol.failover_timeout,
      retryIntervalMs: DECISION_RETRY_INTERVAL_MS,
    });
    this.lastTickMs = host.clock.monotonicMs();
    this.lastStatusLogMs = this.lastTickMs;
    this.transport = host.transport({
      bindAddress: host.sealing.location.address,
      tls: host.tls,
      logger: host.logger,
      onEnvelope: (envelope) => this.onEnvelope(envelope),
    });
  }

  /** Listens, starts the protocol, and resolves with its decision. */
  async decide(): Promise<DriverDecision> {
    const bound = await this.transport.listen();
    this.host.logger.info(`recovery decision protocol: location "${this.self}" listening on ${bound}; ${this.status()}`);
    const decided = new Promise<DriverDecision>((resolve) => (this.resolveDecision = resolve));
    this.tick();
    return decided;
  }

  /** The protocol's phase and what it waits for (GET /node/state, logs). */
  status(): string {
    const dropped = this.dropped > 0 ? ` (${this.dropped} message(s) refused)` : '';
    return `${this.protocol.status()}${dropped}`;
  }

  get phase(): string {
    return this.protocol.phase;
  }

  /** The opener created its service: IAmOpen now tells the others where to join and whom to trust. */
  announceOpen(service: OpenedService): void {
    this.opened = service;
    for (const location of this.addressOf.keys()) {
      if (location !== this.self) this.send(location, { kind: 'IAmOpen', open_kind: (this.protocol.decision as { openKind: 'Election' | 'Failover' }).openKind });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
    await this.transport.close();
  }

  private tick(): void {
    if (this.closed) return;
    const now = this.host.clock.monotonicMs();
    const elapsed = now - this.lastTickMs;
    this.lastTickMs = now;
    this.handle(this.protocol.tick(elapsed));
    // While undecided, the log says what the node waits for, now and then.
    if (this.protocol.decision === undefined && now - this.lastStatusLogMs >= DECISION_STATUS_LOG_INTERVAL_MS) {
      this.lastStatusLogMs = now;
      this.host.logger.info(`recovery decision protocol: ${this.status()}`);
    }
    this.timer = this.host.clock.setTimer(DECISION_RETRY_INTERVAL_MS, () => this.tick());
  }

  private handle(output: DecisionOutput, from?: string): void {
    if (output.warning !== undefined) this.host.logger.fail(`recovery decision protocol: ${output.warning}`);
    for (const { to, message } of output.send) this.send(to, message);
    if (output.decision !== undefined) this.decided(output.decision, from);
  }

  private decided(decision: Decision, from: string | undefined): void {
    this.host.logger.info(`recovery decision protocol: ${decision.kind === 'Open' ? `this location opens the service (${decision.openKind})` : `location "${decision.target}" opened the service: joining it`}`);
    if (decision.kind === 'Open') {
      this.resolveDecision?.({ kind: 'Open', openKind: decision.openKind });
      return;
    }
    const service = this.serviceOf.get(from ?? decision.target);
    if (service === undefined) return; // Unreachable: IAmOpen is accepted only with its service.
    this.resolveDecision?.({ kind: 'Join', target: decision.target, service });
    void this.close();
  }

  private send(to: string, message: DecisionMessage): void {
    const address = this.addressOf.get(to);
    if (address === undefined) return;
    // IAmOpen goes out once the service exists (announceOpen): its receivers need where and whom to join.
    if (message.kind === 'IAmOpen' && this.opened === undefined) return;
    const service = message.kind === 'IAmOpen' ? this.opened : undefined;
    const signature = this.host.sign(signedBytes(this.self, to, message, service));
    const envelope: Envelope = {
      from: this.self,
      to,
      message,
      ...(service !== undefined ? { service } : {}),
      public_key: this.host.publicKeyPem,
      quote_info: this.host.quoteInfo,
      signature: Buffer.from(signature).toString('base64'),
    };
    this.transport.send(address, envelope, message.kind);
  }

  private onEnvelope(raw: unknown): void {
    if (this.closed) return;
    try {
      const { from, message, service } = this.check(raw);
      if (service !== undefined) this.serviceOf.set(from, service);
      this.handle(this.protocol.receive(from, message), from);
    } catch (e) {
      this.dropped++;
      // The first refusal of each kind is worth an operator's eye; repeats (retries) are not.
      const reason = errorMessage(e);
      const kind = reason.split(':')[0]!;
      if (!this.refusalsLogged.has(kind) && this.refusalsLogged.size < 16) {
        this.refusalsLogged.add(kind);
        this.host.logger.fail(`recovery decision protocol: a message was refused: ${reason}`);
      }
    }
  }

  /** The checks of the module's header; throws what failed. */
  private check(raw: unknown): { from: string; message: DecisionMessage; service: OpenedService | undefined } {
    if (typeof raw !== 'object' || raw === null) throw new Error('not an envelope');
    const e = raw as Partial<Envelope>;
    if (e.to !== this.self) throw new Error('not addressed to this location');
    if (typeof e.from !== 'string' || !this.addressOf.has(e.from) || e.from === this.self) throw new Error(`from an unexpected location ${String(e.from).slice(0, 64)}`);
    if (typeof e.public_key !== 'string' || typeof e.signature !== 'string') throw new Error('no public key or signature');
    const message = parseDecisionMessage(e.message);
    const service = message.kind === 'IAmOpen' ? checkService(e.service) : undefined;
    const verdict = verifyVirtualQuote(e.quote_info as QuoteInfo, publicKeyDer(e.public_key));
    if (!verdict.ok) throw new Error(`quote: ${verdict.reason}`);
    if (!this.host.trustsCode(verdict.quote.measurement, verdict.quote.host_data)) throw new Error('the sender runs code the recovered ledger does not trust');
    // Over the message as it came (JSON keeps the sender's key order), not as it was parsed.
    if (!verifyEcdsa(e.public_key, signedBytes(e.from, e.to, e.message as DecisionMessage, e.service), new Uint8Array(Buffer.from(e.signature, 'base64')))) throw new Error('bad signature');
    return { from: e.from, message, service };
  }
}

function signedBytes(from: string, to: string, message: DecisionMessage, service: OpenedService | undefined): Uint8Array {
  return utf8.encode(JSON.stringify([from, to, message, service ?? null]));
}

function checkService(value: unknown): OpenedService {
  const s = value as Partial<OpenedService> | undefined;
  if (typeof s?.rpc_address !== 'string' || s.rpc_address.length > 300 || typeof s.service_certificate !== 'string' || s.service_certificate.length > 16384) {
    throw new Error('an IAmOpen without the opened service');
  }
  return { rpc_address: s.rpc_address, service_certificate: s.service_certificate };
}
