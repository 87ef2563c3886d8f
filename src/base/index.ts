export * from './assert.js';
export * from './bytes.js';
export * from './errors.js';
export * from './ids.js';
export * from './units.js';
export * from './json.js';
export * from './random.js';
