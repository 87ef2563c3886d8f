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
    { name: 'cert (the node certificate)', pem: nodeCertificatePem },
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
