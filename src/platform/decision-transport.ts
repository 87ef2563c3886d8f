/**
 * The recovery decision protocol's transport (docs/recovery-decision.md): while a node recovers
 * with sealing_recovery configured, it listens on `sealing_recovery.location.address` for the
 * other locations' messages and sends its own to theirs, one HTTPS POST of a JSON envelope each.
 *
 * TLS here gives privacy from onlookers, not authentication: the recovering nodes have no common
 * trust anchor yet (each makes its own service identity only once the protocol decided), so a
 * sender is not checked at the TLS layer. Each envelope is signed instead, with the sender's node
 * key, and carries the sender's certificate and virtual quote; the node checks all of it before
 * the protocol sees the message (src/node/recovery/decision-driver.ts).
 *
 * Bounds: a body of at most 64 KiB, 32 connections at once, 5 s per request; at most one request
 * in flight per destination and kind of message (the protocol resends on its own timer, so a
 * message dropped while another of its kind is in flight is not lost for good).
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorMessage } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { formatHostPort, parseHostPort } from '../config/index.js';

export const DECISION_PATH = '/recovery_decision';
export const DECISION_BODY_BYTES_MAX = 64 * 1024;
const CONNECTIONS_MAX = 32;
const REQUEST_TIMEOUT_MS = 5000;

export interface DecisionTransportOptions {
  readonly bindAddress: string;
  readonly tls: { readonly keyPem: string; readonly certificatePem: string };
  readonly logger: Logger;
  /** An envelope arrived (parsed JSON, not yet checked). */
  readonly onEnvelope: (envelope: unknown) => void;
}

export class DecisionTransport {
  private readonly server: https.Server;
  private readonly inFlight = new Set<string>();
  private readonly agent = new https.Agent({ keepAlive: true, maxSockets: 4, rejectUnauthorized: false });
  private closed = false;

  constructor(private readonly options: DecisionTransportOptions) {
    this.server = https.createServer({ key: options.tls.keyPem, cert: options.tls.certificatePem, requestTimeout: REQUEST_TIMEOUT_MS, headersTimeout: REQUEST_TIMEOUT_MS }, (req, res) =>
      this.handle(req, res),
    );
    this.server.maxConnections = CONNECTIONS_MAX;
  }

  /** Binds the location's address; resolves with the address actually bound. */
  listen(): Promise<string> {
    const parsed = parseHostPort(this.options.bindAddress);
    if (typeof parsed === 'string') return Promise.reject(new Error(`sealing_recovery.location.address: ${parsed}`));
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(parsed.port, parsed.host, () => {
        this.server.off('error', reject);
        const bound = this.server.address() as AddressInfo;
        resolve(formatHostPort({ host: parsed.host, port: bound.port }));
      });
    });
  }

  /**
   * Sends `envelope` to the location at `address`, unless a message of the same `kind` to it is
   * still in flight (a node sends several kinds to one location in one round: each goes).
   */
  send(address: string, envelope: unknown, kind = ''): void {
    const key = `${kind} ${address}`;
    if (this.closed || this.inFlight.has(key)) return;
    const parsed = parseHostPort(address);
    if (typeof parsed === 'string') {
      this.options.logger.fail(`recovery decision: cannot send to "${address}": ${parsed}`);
      return;
    }
    const body = Buffer.from(JSON.stringify(envelope));
    this.inFlight.add(key);
    const done = () => this.inFlight.delete(key);
    const request = https.request(
      {
        host: parsed.host,
        port: parsed.port,
        method: 'POST',
        path: DECISION_PATH,
        agent: this.agent,
        timeout: REQUEST_TIMEOUT_MS,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (response) => {
        response.resume();
        response.on('end', done);
        response.on('error', done);
      },
    );
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('close', done);
    request.on('error', (e) => {
      done();
      this.options.logger.debug(`recovery decision protocol: sending to ${address} failed: ${errorMessage(e)}`);
    });
    request.end(body);
  }

  /** Messages sent and not yet answered (or failed). */
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.agent.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const answer = (status: number, code?: string, message?: string) => {
      res.writeHead(status, code ? { 'content-type': 'application/json' } : {});
      res.end(code ? JSON.stringify({ error: { code, message } }) : undefined);
    };
    if (req.method !== 'POST' || req.url !== DECISION_PATH) {
      req.resume();
      answer(404, 'ResourceNotFound', `only POST ${DECISION_PATH} is served here`);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > DECISION_BODY_BYTES_MAX) {
        answer(413, 'RequestBodyTooLarge', `a recovery decision message is at most ${DECISION_BODY_BYTES_MAX} bytes`);
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > DECISION_BODY_BYTES_MAX) return;
      let envelope: unknown;
      try {
        envelope = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        answer(400, 'InvalidJsonBody', 'a recovery decision message is a JSON envelope');
        return;
      }
      answer(204);
      this.options.onEnvelope(envelope);
    });
  }
}
