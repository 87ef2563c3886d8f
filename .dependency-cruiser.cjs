/**
 * The written layering of src/ (see docs/architecture.md, "Layering"), checked in CI by `npm run lint`.
 * Lower layers never import higher ones; the deterministic zone never touches I/O modules.
 */
const IO_MODULES = '^(node:)?(fs|fs/promises|net|tls|http|https|http2|dgram|child_process|worker_threads|timers|timers/promises|readline)$';

/** Each folder and the src/ folders it may import (itself is always allowed). */
const allowed = {
  base: [],
  crypto: ['base'],
  merkle: ['base', 'crypto'],
  consensus: ['base'],
  kv: ['base', 'crypto'],
  // ledger seals entries (src/ledger/sealing.ts): the private domain's encryption and the Merkle leaf.
  ledger: ['base', 'crypto', 'kv', 'merkle'],
  attestation: ['base', 'crypto'],
  jwt: ['base', 'crypto', 'kv'],
  gov: ['base', 'crypto', 'kv', 'merkle'],
  recovery: ['base', 'crypto', 'kv', 'merkle', 'ledger'],
  audit: ['base', 'crypto', 'merkle', 'kv', 'ledger'],
  config: ['base'],
  platform: ['base', 'crypto', 'kv', 'merkle', 'ledger', 'config'],
  node: ['base', 'crypto', 'merkle', 'consensus', 'kv', 'ledger', 'attestation', 'jwt', 'gov', 'recovery', 'config'],
  http: ['base', 'crypto', 'merkle', 'consensus', 'kv', 'ledger', 'attestation', 'jwt', 'gov', 'recovery', 'config', 'node', 'platform'],
  apps: ['base', 'crypto', 'kv', 'http', 'node'],
  // testing drives governance as a member would, with the member commands' client (src/cli/member.ts).
  testing: ['base', 'crypto', 'merkle', 'consensus', 'kv', 'ledger', 'attestation', 'jwt', 'gov', 'recovery', 'config', 'node', 'platform', 'http', 'apps', 'audit', 'cli'],
  cli: ['base', 'crypto', 'merkle', 'consensus', 'kv', 'ledger', 'attestation', 'jwt', 'gov', 'recovery', 'config', 'node', 'platform', 'http', 'apps', 'audit'],
};

const folders = Object.keys(allowed);
const layering = folders.map((folder) => {
  const others = folders.filter((f) => f !== folder && !allowed[folder].includes(f));
  return {
    name: `layering-${folder}`,
    severity: 'error',
    comment: `src/${folder} may import only: ${allowed[folder].join(', ') || '(nothing)'}`,
    from: { path: `^src/${folder}/`, pathNot: '\\.test\\.ts$' },
    to: { path: others.length ? `^src/(${others.join('|')})/` : '^$' },
  };
});

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
    {
      name: 'deterministic-zone-no-io',
      severity: 'error',
      comment: 'consensus, kv and merkle take time, randomness and I/O only through injected interfaces',
      from: { path: '^src/(consensus|kv|merkle)/' },
      to: { path: IO_MODULES, dependencyTypes: ['core'] },
    },
    {
      name: 'consensus-is-pure',
      severity: 'error',
      comment: 'the consensus core imports no node:* module at all',
      from: { path: '^src/consensus/' },
      to: { dependencyTypes: ['core'] },
    },
    ...layering,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    exclude: { path: '^(dist|node_modules)/' },
  },
};
