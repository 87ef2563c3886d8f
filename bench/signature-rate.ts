/**
 * Signatures per committed write: three nodes of each build under `x-covenant-consistency:
 * committed` writes (autocannon, 200-byte values over 1,000 keys), then `covenant ledger verify`
 * (the same build's) over the primary's ledger counts its entries and signature transactions.
 * Builds alternate A B B A.
 *
 *   node dist/bench/signature-rate.js [--builds dist,/other/checkout/dist] [--duration 5] [--connections 32]
 */
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

const durationS = Number(option('--duration') ?? 5);
const connections = Number(option('--connections') ?? 32);
const ownDist = resolve(fileURLToPath(new URL('..', import.meta.url)));
const builds = (option('--builds') ?? ownDist).split(',').map((d) => resolve(d));

interface Started {
  dir: string;
  address: string;
  serviceCertificatePem: string;
  user: { certificatePem: string; privateKeyPem: string };
  stop(): Promise<number | null>;
}

async function measure(dist: string): Promise<{ writes: number; entries: number; signatures: number }> {
  const { startNetwork } = (await import(join(dist, 'src/testing/network.js'))) as {
    startNetwork(count: number, patch: Record<string, unknown>): Promise<{ primary(): Promise<Started>; stopAll(): Promise<void> }>;
  };
  const network = await startNetwork(3, { logging: { level: 'fail' } });
  try {
    const primary = await network.primary();
    let next = 0;
    const result = await autocannon({
      url: `https://${primary.address}/app/log/private`,
      method: 'POST',
      connections,
      duration: durationS,
      headers: { 'content-type': 'application/json', 'x-covenant-consistency': 'committed' },
      tlsOptions: { ca: primary.serviceCertificatePem, cert: primary.user.certificatePem, key: primary.user.privateKeyPem },
      requests: [{ setupRequest: (request) => ({ ...request, body: JSON.stringify({ id: next++ % 1000, msg: 'v'.repeat(200) }) }) }],
    });
    await primary.stop();
    const verify = spawnSync(process.execPath, [join(dist, 'src/cli/main.js'), 'ledger', 'verify', join(primary.dir, 'ledger')], { encoding: 'utf8' });
    const found = /verified (\d+) entries .* (\d+) signatures/.exec(verify.stdout);
    if (found === null) throw new Error(`ledger verify: ${verify.stdout}${verify.stderr}`);
    return { writes: result['2xx'], entries: Number(found[1]), signatures: Number(found[2]) };
  } finally {
    await network.stopAll();
  }
}

for (const dist of [...builds, ...[...builds].reverse()]) {
  const { writes, entries, signatures } = await measure(dist);
  console.log(`${dist}: ${writes} committed writes, ${entries} ledger entries, ${signatures} signatures: one signature per ${(entries / Math.max(1, signatures)).toFixed(1)} entries`);
}
process.exit(0);
