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
  gov: ['base', 'crypto', 'kv', 'merkle', 'jwt'],
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


/**
 * Layering inside src/node (docs/node.md): the facade (node.ts) and the composition root
 * (compose.ts) may import every part; the start-up flows import parts, never the composition; the
 * parts reach each other through narrow interfaces and never import the flows, the composition or
 * the facade; the driver sees only its DriverHost; the leaves (errors, limits, lifecycle,
 * identity, persistence) import no part. The layers above import only the node's public face.
 */
const NODE_PARTS = 'driver|replica|peers|write/|join/|tasks/|queries/|snapshots|cleanup|certificates';
const nodeLayering = [
  {
    name: 'node-facade-is-top',
    severity: 'error',
    comment: 'nothing inside src/node imports the facade or the composition root, but the facade',
    from: { path: '^src/node/', pathNot: '^src/node/node\\.ts$' },
    to: { path: '^src/node/(node|compose)\\.ts$' },
  },
  {
    name: 'node-parts-not-flows',
    severity: 'error',
    comment: 'the parts of a node never import the start-up flows',
    from: { path: '^src/node/', pathNot: '^src/node/(flows/|node\\.ts$|compose\\.ts$)' },
    to: { path: '^src/node/flows/' },
  },
  {
    name: 'node-driver-narrow',
    severity: 'error',
    comment: 'the consensus driver reaches the rest of the node only through DriverHost',
    from: { path: '^src/node/driver\\.ts$' },
    to: { path: '^src/node/', pathNot: '^src/node/limits\\.ts$' },
  },
  {
    name: 'node-leaves',
    severity: 'error',
    comment: 'errors, limits, the lifecycle table, identity and persistence import no part of the node',
    from: { path: '^src/node/(errors|limits|lifecycle|persistence)\\.ts$|^src/node/identity/' },
    to: { path: `^src/node/(${NODE_PARTS}|flows/)` },
  },
  {
    name: 'node-public-face',
    severity: 'error',
    comment: 'the layers above use the node through its face (node.ts, api.ts), its error codes and its shared types, never its parts',
    from: { path: '^src/(http|apps|cli|testing)/' },
    to: { path: `^src/node/(${NODE_PARTS}|compose|flows/|identity/|persistence|lifecycle|limits)` },
  },
];

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
    {
      name: 'deterministic-zone-no-io',
      severity: 'error',
      comment: 'consensus, kv, merkle and recovery take time, randomness and I/O only through injected interfaces',
      from: { path: '^src/(consensus|kv|merkle|recovery)/' },
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
    ...nodeLayering,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    exclude: { path: '^(dist|node_modules)/' },
  },
};
