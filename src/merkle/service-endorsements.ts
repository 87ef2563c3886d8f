/**
 * Receipts across recoveries: a recovery gives the service a new identity (key and certificate),
 * which endorses the previous one. A receipt signed before the recovery names a node certificate
 * that an earlier service key issued; its `service_endorsements` chain that key to the current
 * service certificate, so that a verifier needs only the newest certificate
 * (docs/merkle.md "Receipts across recoveries").
 *
 * The chain, in order: the node certificate is issued by the key that endorsements[0] certifies,
 * endorsements[i] by the key that endorsements[i + 1] certifies, and the last by the service
 * certificate's key. Each link is checked as X.509 checks an issuer (names, key identifiers) and by
 * its signature.
 */
import { parseCertificate, verifyCertificateSignedBy } from '../crypto/index.js';
import { merkleError, MerkleErrorCode } from './errors.js';

/** At most this many endorsements in a receipt: one per recovery since the receipt was signed. */
export const SERVICE_ENDORSEMENTS_MAX = 64;

function broken(reason: string): Error {
  return merkleError(MerkleErrorCode.InvalidServiceEndorsements, `invalid service_endorsements: ${reason}`);
}

/** The endorsements of a receipt as given: undefined when it carries none (the field absent or empty). */
export function serviceEndorsementsOf(receipt: { readonly service_endorsements?: unknown }): readonly string[] | undefined {
  const endorsements = receipt.service_endorsements;
  if (endorsements === undefined) return undefined;
  if (!Array.isArray(endorsements) || !endorsements.every((e) => typeof e === 'string')) throw broken('it must be an array of PEM certificates');
  if (endorsements.length > SERVICE_ENDORSEMENTS_MAX) throw broken(`at most ${SERVICE_ENDORSEMENTS_MAX} endorsements, got ${endorsements.length}`);
  return endorsements.length === 0 ? undefined : (endorsements as string[]);
}

/**
 * Checks that `endorsements` chain the node certificate to the service certificate, every link by
 * its signature. Throws InvalidServiceEndorsements naming the first link that fails.
 */
export function verifyServiceEndorsements(nodeCertificatePem: string, endorsements: readonly string[], serviceCertificatePem: string): void {
  verifyLinks({ name: 'cert (the node certificate)', pem: nodeCertificatePem }, endorsements, serviceCertificatePem);
}

/**
 * Checks that `endorsements` (at least one) chain the key that `endorsements[0]` certifies to the
 * service certificate: the key that signed a COSE receipt before a recovery.
 */
export function verifyEndorsedServiceKey(endorsements: readonly string[], serviceCertificatePem: string): void {
  if (endorsements.length === 0) throw broken('no endorsement certifies the key');
  verifyLinks(undefined, endorsements, serviceCertificatePem);
}

function verifyLinks(leaf: { name: string; pem: string } | undefined, endorsements: readonly string[], serviceCertificatePem: string): void {
  endorsements.forEach((pem, i) => {
    let isCa: boolean;
    try {
      isCa = parseCertificate(pem).isCa;
    } catch {
      throw broken(`service_endorsements[${i}] is not a PEM certificate`);
    }
    if (!isCa) throw broken(`service_endorsements[${i}] is not a CA certificate: it cannot endorse a service key`);
  });
  const links = [
    ...(leaf !== undefined ? [leaf] : []),
    ...endorsements.map((pem, i) => ({ name: `service_endorsements[${i}]`, pem })),
    { name: 'the service certificate', pem: serviceCertificatePem },
  ];
  for (let i = 0; i + 1 < links.length; i++) {
    const [subject, issuer] = [links[i]!, links[i + 1]!];
    if (!verifyCertificateSignedBy(subject.pem, issuer.pem)) {
      throw broken(
        `${subject.name} is not issued and signed by the key of ${issuer.name}; the endorsements must go from the oldest ` +
          'service key (the one that issued cert) to the newest, the last one issued by the service certificate given',
      );
    }
  }
}

/**
 * The chain of endorsements a service publishes (GET /node/service/endorsements, docs/merkle.md
 * "Receipts kept from before a recovery"): its answer as is, `{"endorsements": [{"endorsement":
 * <PEM>, ...}, ...]}`, or a plain array of PEM endorsements; either oldest first. Throws
 * InvalidServiceEndorsements when it is neither.
 */
export function serviceEndorsementsChainOf(value: unknown): string[] {
  const list = Array.isArray(value) ? value : typeof value === 'object' && value !== null ? (value as { endorsements?: unknown }).endorsements : undefined;
  if (!Array.isArray(list)) throw broken('the chain must be the answer of GET /node/service/endorsements or an array of PEM endorsements');
  if (list.length > SERVICE_ENDORSEMENTS_MAX) throw broken(`at most ${SERVICE_ENDORSEMENTS_MAX} endorsements, got ${list.length}`);
  return list.map((item: unknown, i) => {
    const pem = typeof item === 'string' ? item : typeof item === 'object' && item !== null ? (item as { endorsement?: unknown }).endorsement : undefined;
    if (typeof pem !== 'string') throw broken(`the chain's endorsement ${i} is not a PEM certificate`);
    return pem;
  });
}

/**
 * The endorsements of a service's whole chain (oldest first) that a receipt kept from before a
 * recovery needs: from the first one that certifies the key that signed it, `certifiesSigner`, to
 * the newest. Undefined when none does (the receipt is then checked against the service
 * certificate alone).
 */
export function endorsementsFromChain(chain: readonly string[], certifiesSigner: (endorsementPem: string) => boolean): string[] | undefined {
  const from = chain.findIndex((pem) => {
    try {
      return certifiesSigner(pem);
    } catch (e) {
      // A chain's malformed certificate certifies nothing; verifyServiceEndorsements names it if used.
      if (e instanceof Error) return false;
      throw e;
    }
  });
  return from < 0 ? undefined : chain.slice(from);
}
