// Lint: typescript-eslint recommended rules plus the project's habits (no empty catch, no floating
// promises in server code). Import cycles and folder layering are checked by dependency-cruiser
// (.dependency-cruiser.cjs), both run by `npm run lint`.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bin/**', 'scripts/**', 'eslint.config.js', '.dependency-cruiser.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Application bundles (docs/apps.md): ES modules run by the service's engine, with its global `covenant`.
    files: ['examples/**/*.js', 'test/e2e/fixtures/**/*.js'],
    languageOptions: { sourceType: 'module', globals: { covenant: 'readonly' } },
  },
  {
    files: ['**/*.ts'],
    rules: {
      'no-empty': ['error', { allowEmptyCatch: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    // The deterministic zone (consensus, kv, merkle, recovery) and every module the node simulator runs
    // (src/testing/sim/node-sim.ts: the node layer, the ledger, attestation), with the node-to-node
    // channels and the forwarder: sockets are fine where they are, but time and randomness come from
    // the injected Clock and RandomSource, so that tests and the simulator drive them.
    files: [
      'src/consensus/**/*.ts',
      'src/kv/**/*.ts',
      'src/merkle/**/*.ts',
      'src/recovery/**/*.ts',
      'src/ledger/**/*.ts',
      'src/attestation/**/*.ts',
      'src/node/**/*.ts',
      'src/platform/node-channel*.ts',
      'src/http/forwarding.ts',
      'src/http/pipeline.ts',
    ],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'take time from the injected clock' },
        { object: 'performance', property: 'now', message: 'take time from the injected clock (monotonicMs)' },
        { object: 'Math', property: 'random', message: 'take randomness from the injected random source' },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'timers come from the injected clock' },
        { name: 'setInterval', message: 'timers come from the injected clock' },
        { name: 'setImmediate', message: 'timers come from the injected clock' },
        { name: 'clearTimeout', message: 'timers come from the injected clock' },
        { name: 'clearInterval', message: 'timers come from the injected clock' },
        { name: 'clearImmediate', message: 'timers come from the injected clock' },
        { name: 'performance', message: 'take time from the injected clock (monotonicMs)' },
      ],
      'no-restricted-imports': [
        'error',
        {
          paths: ['node:timers', 'node:timers/promises', 'node:perf_hooks', 'timers', 'timers/promises', 'perf_hooks'].map((name) => ({
            name,
            message: 'time comes from the injected clock',
          })),
        },
      ],
    },
  },
);
