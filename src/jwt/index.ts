/** Public face of token authentication: stored signing keys, validation, key refresh. */
export * from './errors.js';
export * from './keys.js';
export * from './validate.js';
export * from './refresh.js';
