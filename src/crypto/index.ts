/** Public face of the crypto layer: digests, keys and signatures, certificates, AEAD, COSE_Sign1. */
export * from './errors.js';
export * from './digest.js';
export * from './keys.js';
export * from './signature-verifier.js';
export * from './aead.js';
export * from './certificates.js';
export * from './cose.js';
export * from './jwk.js';
export * from './certificate-renewal.js';
export * from './certificate-fields.js';
