/**
 * The certificates a node serves, over their lifetime (docs/certificates.md): the
 * service certificate (clients' trust anchor) and the node's own certificate endorsed by the
 * service. Members renew both by governance (set_service_certificate_validity,
 * set_node_certificate_validity, set_all_nodes_certificate_validity), which writes the renewed
 * certificates to service.info and nodes.endorsed_certificates. Once such a write is *committed*
 * (a renewal still in flight could be rolled back), every node adopts it: the node state file,
 * node_certificate_file (and service_certificate_file where it is an output), and the TLS
 * identity of its RPC interfaces and node-to-node channel, without a restart.
 *
 * The node also watches the expiry of both certificates: it warns in its log ahead of it (see
 * limits.ts) and reports the time left in GET /node/metrics.
 */
import type { Clock, TimerHandle } from '../base/clock.js';
import type { Logger } from '../base/log.js';
import { certificateValidity, parseCertificate, verifyCertificateSignedBy } from '../crypto/index.js';
import type { Store, StoreView } from '../kv/index.js';
import type { NodeInit } from './api.js';
import { isoSeconds, type CertificateExpiry, type CertificateMetrics } from './reports.js';
import type { NodeIdentity } from './identity/node-identity.js';
import type { ServiceIdentity } from './identity/service-identity.js';
import { certificateExpiryCheckIntervalMs, certificateExpiryWarningFraction, certificateExpiryWarningMsMax } from './limits.js';
import { SINGLETON_KEY, TableDefs } from './tables.js';

export interface NodeCertificatesHost {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly identity: NodeIdentity;
  readonly service: ServiceIdentity;
  /** The store at its committed version. */
  committedView(): StoreView;
  /** Writes the node state file (it holds both certificates). */
  persistState(): void;
  /** Writes node_certificate_file, and service_certificate_file where the node's command outputs it. */
  writeCertificateFiles(): void;
}


export class NodeCertificates {
  private observed = false;
  private lastSeen: { service: string | undefined; node: string | undefined } = { service: undefined, node: undefined };
  private installed: (() => void) | undefined;
  private timer: TimerHandle | undefined;
  private stopped = false;

  constructor(private readonly host: NodeCertificatesHost) {}

  /** `install` presents the node's current certificate on its interfaces; it runs again after each adopted renewal. */
  onInstall(install: () => void): void {
    this.installed = install;
  }

  /** Starts the expiry checks (now, then every certificateExpiryCheckIntervalMs). */
  start(): void {
    if (this.timer !== undefined || this.stopped) return;
    const check = () => {
      this.checkExpiry();
      if (!this.stopped) this.timer = this.host.clock.setTimer(certificateExpiryCheckIntervalMs, check);
    };
    check();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
  }

  /**
   * Commit advanced: adopts a committed renewal of the service certificate or of this node's.
   * The first look (a node that joined from a snapshot older than the certificates its join answer
   * gave it, or replays its ledger after a restart) adopts only a certificate that outlives the
   * one held; later changes are the members' decisions and are adopted as they are.
   */
  onCommit(): void {
    const { identity, service } = this.host;
    if (!identity.exists || identity.nodeCertificatePem === '' || !service.holdsKey) return;
    const view = this.host.committedView();
    const serviceCert = view.table(TableDefs.serviceInfo).get(SINGLETON_KEY)?.cert;
    const nodeCert = view.table(TableDefs.nodesEndorsedCertificates).get(identity.nodeId);
    // Most commits change neither: what was judged at the previous commit is not judged again.
    if (this.observed && serviceCert === this.lastSeen.service && nodeCert === this.lastSeen.node) return;
    this.lastSeen = { service: serviceCert, node: nodeCert };
    const first = !this.observed;
    this.observed = true;
    const serviceChanged = this.differs(serviceCert, service.certificatePem, first) && isRenewalOf(serviceCert!, service.certificatePem);
    if (serviceChanged) service.adopt(serviceCert!);
    const nodeChanged =
      this.differs(nodeCert, identity.nodeCertificatePem, first) && isRenewalOf(nodeCert!, identity.nodeCertificatePem) && verifyCertificateSignedBy(nodeCert!, service.certificatePem);
    if (!serviceChanged && !nodeChanged) return;
    if (nodeChanged) identity.nodeCertificatePem = nodeCert!;
    this.host.persistState();
    this.host.writeCertificateFiles();
    if (nodeChanged) this.installed?.();
    const now = this.host.clock.nowMs();
    const adopted: [string, string][] = [];
    if (serviceChanged) adopted.push(['service', serviceCert!]);
    if (nodeChanged) adopted.push(['node', nodeCert!]);
    for (const [what, pem] of adopted) {
      const { notAfter } = certificateValidity(pem);
      this.host.logger.info(`renewed ${what} certificate committed and installed: valid to ${isoSeconds(notAfter)} (${Math.floor((notAfter.getTime() - now) / 1000)} s from now)`);
    }
    this.checkExpiry();
  }

  /** Whether `committed` should replace `held`. */
  private differs(committed: string | undefined, held: string, first: boolean): boolean {
    if (committed === undefined || committed === held) return false;
    if (!first || held === '') return true;
    return certificateValidity(committed).notAfter.getTime() > certificateValidity(held).notAfter.getTime();
  }

  /** The validity of the certificates this node serves, for GET /node/metrics. */
  metrics(): CertificateMetrics {
    const now = this.host.clock.nowMs();
    const out: CertificateMetrics = {};
    const node = this.servedNodeCertificate();
    if (node !== '') out.node = expiryOf(node, now);
    if (this.host.service.certificatePem !== '') out.service = expiryOf(this.host.service.certificatePem, now);
    return out;
  }

  private servedNodeCertificate(): string {
    const { identity } = this.host;
    return identity.nodeCertificatePem !== '' ? identity.nodeCertificatePem : identity.exists ? identity.selfSignedCertificatePem : '';
  }

  /** Warns (or, once expired, fails) in the log for each certificate close to its expiry. */
  checkExpiry(): void {
    const now = this.host.clock.nowMs();
    const checks: [string, string][] = [
      ['node', this.servedNodeCertificate()],
      ['service', this.host.service.certificatePem],
    ];
    for (const [what, pem] of checks) {
      if (pem === '') continue;
      const { notBefore, notAfter } = certificateValidity(pem);
      const leftMs = notAfter.getTime() - now;
      const warnMs = Math.min(certificateExpiryWarningMsMax, certificateExpiryWarningFraction * (notAfter.getTime() - notBefore.getTime()));
      const action = what === 'service' ? 'set_service_certificate_validity' : 'set_node_certificate_validity or set_all_nodes_certificate_validity';
      if (leftMs <= 0) {
        this.host.logger.fail(`the ${what} certificate expired at ${isoSeconds(notAfter)}: clients and peers refuse it; members renew it with a ${action} proposal`);
      } else if (leftMs < warnMs) {
        this.host.logger.fail(
          `the ${what} certificate expires at ${isoSeconds(notAfter)}, in ${Math.floor(leftMs / 1000)} s: members renew it with a ${action} proposal`,
        );
      }
    }
  }
}

/** The certificates part of a node, over its identities, store and files. */
export function nodeCertificates(parts: {
  readonly init: Pick<NodeInit, 'logger' | 'clock' | 'config' | 'writeTextFile'>;
  readonly identity: NodeIdentity;
  readonly service: ServiceIdentity;
  readonly replica: { readonly store: Store };
  persistState(): void;
}): NodeCertificates {
  const { init, identity, service, replica } = parts;
  const command = init.config.command;
  return new NodeCertificates({
    logger: init.logger,
    clock: init.clock,
    identity,
    service,
    committedView: () => replica.store.readAt(replica.store.committedVersion),
    persistState: () => parts.persistState(),
    writeCertificateFiles: () => {
      init.writeTextFile(init.config.node_certificate_file, identity.nodeCertificatePem);
      // A joiner's service_certificate_file is its input (what it trusted to join), not an output.
      if (command.type !== 'Join') init.writeTextFile(command.service_certificate_file, service.certificatePem);
    },
  });
}

/**
 * Whether `candidate` renews `held`: the same key (a renewal never changes it). The store a
 * recovering node replays holds the previous service's certificates, under other keys, until the
 * recovery records the new ones: those are never adopted.
 */
function isRenewalOf(candidate: string, held: string): boolean {
  return held === '' || parseCertificate(candidate).publicKeyPem === parseCertificate(held).publicKeyPem;
}

function expiryOf(pem: string, nowMs: number): CertificateExpiry {
  const { notBefore, notAfter } = certificateValidity(pem);
  return { valid_from: isoSeconds(notBefore), valid_to: isoSeconds(notAfter), seconds_until_expiry: Math.floor((notAfter.getTime() - nowMs) / 1000) };
}
