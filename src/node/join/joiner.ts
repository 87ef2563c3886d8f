/**
 * The joining node's side (spec "States and transitions", "Join from a snapshot"): sends the join
 * request to the target until the node is trusted, following redirects, fetching a recent snapshot
 * when the target answers StartupSeqnoIsOld, and waiting (Pending) between polls. A target whose
 * TLS identity is not the service's, or a refusal, ends the join with the reason; anything
 * transient is retried every join.retry_timeout, but the same snapshot failure only
 * joinIdenticalFailuresMax times in a row.
 */
import { CovenantError, errorMessage } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import { nodeError } from '../errors.js';
import { joinIdenticalFailuresMax } from '../limits.js';
import { joinResponseServiceStatus, type JoinClient, type JoinRequest, type JoinResponse } from '../join.js';
import type { ServiceStatus } from '../tables.js';

/** TLS failures that mean the join target's certificate is not acceptable (not transient). */
const TLS_IDENTITY_ERRORS = new Set([
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_SIGNATURE_FAILURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

export interface JoinerHost {
  readonly logger: Logger;
  readonly nodeId: string;
  readonly retryTimeoutMs: number;
  /** Whether a StartupSeqnoIsOld answer makes the joiner fetch a snapshot (command.join.fetch_recent_snapshot, never when resuming). */
  readonly mayFetchSnapshot: boolean;
  /** Announcing the addresses of a restarted node: a Pending answer is not a new Pending state. */
  readonly resuming: boolean;
  stopped(): boolean;
  sleep(ms: number): Promise<void>;
  /** The first Pending answer: the node is Pending. */
  onPending(): void;
  /** The service status a join answer reported. */
  onServiceStatus(status: ServiceStatus): void;
  /** Downloads and adopts a snapshot newer than the current startup seqno: the new startup seqno, or why it failed. */
  fetchSnapshot(client: JoinClient, target: string): Promise<SnapshotFetchOutcome>;
}

export type SnapshotFetchOutcome = { readonly startupSeqno: number } | { readonly failure: string };

/**
 * Counts the same snapshot failure in a row: a join that fails this way joinIdenticalFailuresMax
 * times stops with the reason (an invalid snapshot stays invalid), where a changing failure
 * (the target's primary changes, a new snapshot is taken) is retried.
 */
class RepeatedFailures {
  #last: string | undefined;
  #count = 0;

  /** Records a failure; throws JoinRetriesExhausted once the same one came joinIdenticalFailuresMax times in a row. */
  record(failure: string): void {
    this.#count = failure === this.#last ? this.#count + 1 : 1;
    this.#last = failure;
    if (this.#count >= joinIdenticalFailuresMax) {
      throw nodeError('JoinRetriesExhausted', `the join failed ${this.#count} times in a row the same way, giving up: ${failure}`);
    }
  }

  reset(): void {
    this.#last = undefined;
    this.#count = 0;
  }
}

type Answer = { status: number; body: unknown; location?: string; retryAfterMs?: number };

/** Sends the join request until the node is trusted: the answer that carries the network information (undefined if the node stopped first). */
export async function requestJoin(host: JoinerHost, client: JoinClient, firstTarget: string, firstRequest: JoinRequest): Promise<{ response: JoinResponse; attempts: number } | undefined> {
  let request = firstRequest;
  let target = firstTarget;
  let pending = false;
  const failures = new RepeatedFailures();
  for (let attempt = 1; !host.stopped(); attempt++) {
    const answer = await post(host, client, target, request);
    if (answer === undefined) continue;
    if (answer.status >= 300 && answer.status < 400 && answer.location) {
      target = new URL(answer.location).host;
      host.logger.info(`join redirected to ${target}`);
      continue;
    }
    if (answer.status !== 200) {
      const startupSeqno = await handleRefusal(host, client, target, answer, failures);
      if (startupSeqno !== undefined) request = { ...request, startup_seqno: startupSeqno };
      continue;
    }
    const response = answer.body as JoinResponse;
    const status = joinResponseServiceStatus(response);
    if (status !== undefined) host.onServiceStatus(status);
    if (response.node_status === 'Pending' || !response.network_info) {
      if (!pending && !host.resuming) {
        host.onPending();
        host.logger.info(`node ${host.nodeId} is Pending: waiting for members to trust it (polling every ${host.retryTimeoutMs}ms)`);
        pending = true;
      }
      await host.sleep(host.retryTimeoutMs);
      continue;
    }
    return { response, attempts: attempt };
  }
  return undefined;
}

/** One POST; undefined (after waiting) when it failed in a way worth retrying. */
async function post(host: JoinerHost, client: JoinClient, target: string, request: JoinRequest): Promise<Answer | undefined> {
  try {
    return await client.postJoin(target, request);
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && TLS_IDENTITY_ERRORS.has(code)) {
      // Spec "Authentication" 3: the target must present a certificate endorsed by the service
      // certificate that names the target's host. Retrying cannot fix that: stop with the reason.
      throw nodeError('JoinTargetNotTrusted', `the join target ${target} is not trusted: ${errorMessage(e)} (${code})`);
    }
    host.logger.info(`join request to ${target} failed: ${errorMessage(e)}; retrying in ${host.retryTimeoutMs}ms`);
    await host.sleep(host.retryTimeoutMs);
    return undefined;
  }
}

/**
 * A non-200 answer: StartupSeqnoIsOld fetches a snapshot (its startup seqno is returned), a 503 or
 * a 429 waits (the service is between primaries, the target is busy or holds its most Pending
 * nodes, or this address asked too often: not a refusal) for join.retry_timeout or the answer's
 * Retry-After, whichever is longer; anything else ends the join with the target's reason.
 */
async function handleRefusal(host: JoinerHost, client: JoinClient, target: string, answer: Answer, failures: RepeatedFailures): Promise<number | undefined> {
  const error = (answer.body as { error?: { code?: string; message?: string } } | undefined)?.error;
  if (error?.code === 'StartupSeqnoIsOld' && host.mayFetchSnapshot && client.fetchSnapshot) {
    // Spec "Join from a snapshot" 3: fetch a recent snapshot from the peer, then join again.
    const fetched = await host.fetchSnapshot(client, target);
    if ('startupSeqno' in fetched) {
      failures.reset();
      return fetched.startupSeqno;
    }
    failures.record(fetched.failure);
    await host.sleep(host.retryTimeoutMs);
    return undefined;
  }
  if (answer.status === 503 || answer.status === 429) {
    const waitMs = Math.max(host.retryTimeoutMs, answer.retryAfterMs ?? 0);
    host.logger.info(`join request to ${target} not served now (${error?.code ?? answer.status}); retrying in ${waitMs}ms`);
    await host.sleep(waitMs);
    return undefined;
  }
  // The target's own code, so that the joiner's exit names the reason (JoinFailed when it gave none).
  throw new CovenantError(error?.code ?? 'JoinFailed', `join refused by ${target} (${answer.status}): ${error?.message ?? 'no reason given'}`, 400);
}
