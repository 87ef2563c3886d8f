/**
 * SmallBank (examples/smallbank) on a three-node network: the bundle deployed by governance,
 * `--accounts` accounts opened (1,000 in checking and 1,000 in savings each, as CCF's client
 * opens them, in batches of 25), then the SmallBank mix sent to the primary by the same load
 * generator as the other benches (load.ts: keep-alive TLS, one request in flight per connection):
 *
 *   send_payment 25%, and 15% each of amalgamate, balance, deposit_checking, transact_savings,
 *   write_check (the mix of the original SmallBank benchmark; CCF's client draws its five
 *   types, without send_payment, 20% each), accounts drawn uniformly, amounts as CCF's client
 *   draws them: transact_savings -50..50, write_check 0..49, deposit_checking and send_payment
 *   1..50, from a seeded generator (the same sequence every run).
 *
 * Two modes, alternating by round (D C, C D, ...) so that the machine's drift falls on both:
 * default (a write is answered once executed on the primary) and committed (every write sent with
 * `x-covenant-consistency: committed`, answered once committed; balance, a read, is sent with
 * `linearizable`, as a readonly endpoint refuses `committed`). A transaction counts when answered
 * 2xx, or 400 (SmallBank's refusals for insufficient funds: the generator names only existing
 * accounts and valid amounts); any other answer is an error. After each round the bench waits
 * until the network committed the last write. Prints one JSON line per round and a summary.
 *
 *   npm run bench -- --smallbank [--duration 4] [--rounds 2] [--connections 32] [--accounts 1000]
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';
import { readBundleDirectory } from '../src/apps/js/bundle-files.js';
import { deployApp } from '../src/cli/app.js';
import { memberConnectionOf, type StartedNode } from '../src/testing/node-process.js';
import { startNetwork, until } from '../src/testing/network.js';
import { Prng } from '../src/testing/prng.js';
import { buildRequest, runLoad, type LoadTarget } from './load.js';
import { numberArg } from './args.js';

const durationMs = numberArg('--duration', 4) * 1000;
const rounds = numberArg('--rounds', 2);
const connections = numberArg('--connections', 32);
const accounts = numberArg('--accounts', 1000);
const BATCH = 25;
const BUNDLE = readBundleDirectory(join(fileURLToPath(new URL('../..', import.meta.url)), 'examples', 'smallbank'));

type Mode = 'default' | 'committed';
type Kind = 'send_payment' | 'amalgamate' | 'balance' | 'deposit_checking' | 'transact_savings' | 'write_check';

/** Percent of the mix per transaction type (sums to 100). */
const SMALLBANK_MIX: Readonly<Record<Kind, number>> = {
  send_payment: 25,
  amalgamate: 15,
  balance: 15,
  deposit_checking: 15,
  transact_savings: 15,
  write_check: 15,
};

/** The mix as 100 slots, one type each: a draw from 0..99 picks one. */
const SLOTS: Kind[] = Object.entries(SMALLBANK_MIX).flatMap(([kind, percent]) => Array<Kind>(percent).fill(kind as Kind));
if (SLOTS.length !== 100) throw new Error('the SmallBank mix does not sum to 100%');

function targetOf(node: StartedNode): LoadTarget {
  const i = node.address.lastIndexOf(':');
  return { host: node.address.slice(0, i), port: Number(node.address.slice(i + 1)), ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem };
}

/** The request with `x-covenant-consistency: <value>` added to its head (unchanged without a value). */
function withConsistency(request: Buffer, value: string | undefined): Buffer {
  if (value === undefined) return request;
  const text = request.toString('latin1');
  const headEnd = text.indexOf('\r\n\r\n');
  return Buffer.from(`${text.slice(0, headEnd)}\r\nx-covenant-consistency: ${value}${text.slice(headEnd)}`, 'latin1');
}

/** Builds the raw request of one drawn transaction. */
function requestMaker(host: string, mode: Mode, prng: Prng): () => Buffer {
  const account = () => String(prng.int(0, accounts - 1));
  const two = () => {
    const from = prng.int(0, accounts - 1);
    const to = (from + prng.int(1, accounts - 1)) % accounts;
    return { from: String(from), to: String(to) };
  };
  const post = (path: string, body: unknown) => withConsistency(buildRequest('POST', path, host, JSON.stringify(body)), mode === 'default' ? undefined : 'committed');
  return () => {
    const kind = SLOTS[prng.int(0, 99)]!;
    switch (kind) {
      case 'balance':
        return withConsistency(buildRequest('GET', `/app/balance/${account()}`, host), mode === 'default' ? undefined : 'linearizable');
      case 'transact_savings':
        return post('/app/transact_savings', { name: account(), value: prng.int(-50, 50) });
      case 'deposit_checking':
        return post('/app/deposit_checking', { name: account(), value: prng.int(1, 50) });
      case 'write_check':
        return post('/app/write_check', { name: account(), value: prng.int(0, 49) });
      case 'send_payment':
        return post('/app/send_payment', { ...two(), value: prng.int(1, 50) });
      case 'amalgamate':
        return post('/app/amalgamate', two());
    }
  };
}

async function openAccounts(primary: StartedNode): Promise<void> {
  for (let from = 0; from < accounts; from += BATCH) {
    const to = Math.min(accounts, from + BATCH);
    const answer = await primary.client.request('POST', '/app/accounts', { identity: primary.user, body: { from, to, checking: 1000, savings: 1000 } });
    if (answer.status !== 201) throw new Error(`opening accounts ${from}..${to - 1}: ${answer.status} ${answer.text}`);
  }
}

const network = await startNetwork(3, { logging: { level: 'fail' } });
try {
  const primary = await network.primary();
  await deployApp(BUNDLE, [memberConnectionOf(primary)], () => undefined);
  await openAccounts(primary);
  const prng = new Prng(41);
  let last = '';
  const measure = async (mode: Mode, ms: number) => {
    const next = requestMaker(primary.address, mode, prng);
    let refused = 0;
    let failed = 0;
    const result = await runLoad(targetOf(primary), {
      connections,
      durationMs: ms,
      request: () => next(),
      onResponse: (status, headers) => {
        if (status === 400) refused++;
        else if (status < 200 || status >= 300) failed++;
        const m = /x-covenant-transaction-id: *(\d+\.\d+)/i.exec(headers);
        if (m && status >= 200 && status < 300) last = m[1]!;
      },
    });
    const loadEnd = performance.now();
    const seqno = Number(last.split('.')[1] ?? 0);
    await until('the commit of the last write', async () => {
      const commit = await primary.client.request('GET', '/node/commit');
      return Number(String(commit.body.transaction_id).split('.')[1]) >= seqno ? true : undefined;
    }, 30_000, 2);
    const answered = result.requests - failed;
    return {
      transactionsPerS: Math.round((answered * 1000) / result.elapsedMs),
      refused,
      failed: failed + result.errors,
      catchUpMs: Math.round(performance.now() - loadEnd),
      result,
    };
  };
  for (const mode of ['default', 'committed'] as const) await measure(mode, 1500);
  const totals: Record<Mode, { tps: number[]; p50: number[]; p99: number[] }> = {
    default: { tps: [], p50: [], p99: [] },
    committed: { tps: [], p50: [], p99: [] },
  };
  for (let r = 0; r < rounds; r++) {
    const order: Mode[] = r % 2 === 0 ? ['default', 'committed'] : ['committed', 'default'];
    for (const mode of order) {
      const run = await measure(mode, durationMs);
      totals[mode].tps.push(run.transactionsPerS);
      totals[mode].p50.push(run.result.latencyP50Ms);
      totals[mode].p99.push(run.result.latencyP99Ms);
      console.log(
        JSON.stringify({
          bench: 'smallbank',
          round: r + 1,
          mode,
          transactions_per_s: run.transactionsPerS,
          p50_ms: Math.round(run.result.latencyP50Ms * 10) / 10,
          p99_ms: Math.round(run.result.latencyP99Ms * 10) / 10,
          refused_insufficient_funds: run.refused,
          errors: run.failed,
          commit_catch_up_ms: run.catchUpMs,
          load_average_1m: Math.round(loadavg()[0]! * 10) / 10,
        }),
      );
    }
  }
  const mean = (xs: number[]) => Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 10) / 10;
  console.log(
    JSON.stringify({
      bench: 'smallbank-summary',
      nodes: 3,
      accounts,
      connections,
      duration_s: durationMs / 1000,
      rounds,
      default_transactions_per_s: mean(totals.default.tps),
      default_p50_ms: mean(totals.default.p50),
      default_p99_ms: mean(totals.default.p99),
      committed_transactions_per_s: mean(totals.committed.tps),
      committed_p50_ms: mean(totals.committed.p50),
      committed_p99_ms: mean(totals.committed.p99),
      load_average_1m: Math.round(loadavg()[0]! * 10) / 10,
    }),
  );
} finally {
  await network.stopAll();
}
