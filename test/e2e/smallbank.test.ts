/**
 * End to end: examples/smallbank deployed by governance on a real node. Accounts opened one by
 * one and in a batch; every transaction type, drawn from a seeded generator, checked answer by
 * answer against a model kept by the test (send_payment and amalgamate conserve money, the others
 * change it by what they say); then every balance read back; unknown accounts (404), overdrafts
 * (400 InsufficientFunds, nothing written), malformed bodies and a colliding batch refused; the
 * balances kept in the ledger encrypted.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readBundleDirectory } from '../../src/apps/js/bundle-files.js';
import { deployApp } from '../../src/cli/app.js';
import { memberConnectionOf, removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { waitCommitted } from '../../src/testing/network.js';
import { Prng } from '../../src/testing/prng.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const SEED = 41;
const STEPS = 120;
/** Its name is nowhere else in the ledger: found in clear, it would show a balance map not encrypted. */
const MARKED = 'zq7marked';

interface Account {
  checking: number;
  savings: number;
}

type Op =
  | { kind: 'transact_savings'; name: string; value: number }
  | { kind: 'deposit_checking'; name: string; value: number }
  | { kind: 'write_check'; name: string; value: number }
  | { kind: 'send_payment'; from: string; to: string; value: number }
  | { kind: 'amalgamate'; from: string; to: string }
  | { kind: 'balance'; name: string };

/** What the bank must answer to `op` given `model`, applying it to the model (status, and the accounts' balances on success). */
function expected(model: Map<string, Account>, op: Op): { status: number; code?: string; body?: unknown } {
  const view = (name: string) => ({ name, ...model.get(name)! });
  switch (op.kind) {
    case 'balance': {
      const a = model.get(op.name)!;
      return { status: 200, body: { ...view(op.name), total: a.checking + a.savings } };
    }
    case 'transact_savings': {
      const a = model.get(op.name)!;
      if (a.savings + op.value < 0) return { status: 400, code: 'InsufficientFunds' };
      a.savings += op.value;
      return { status: 200, body: view(op.name) };
    }
    case 'deposit_checking':
      model.get(op.name)!.checking += op.value;
      return { status: 200, body: view(op.name) };
    case 'write_check': {
      const a = model.get(op.name)!;
      a.checking -= a.checking + a.savings < op.value ? op.value + 1 : op.value;
      return { status: 200, body: view(op.name) };
    }
    case 'send_payment': {
      const [s, t] = [model.get(op.from)!, model.get(op.to)!];
      if (s.checking < op.value) return { status: 400, code: 'InsufficientFunds' };
      s.checking -= op.value;
      t.checking += op.value;
      return { status: 200, body: { from: view(op.from), to: view(op.to) } };
    }
    case 'amalgamate': {
      const [s, t] = [model.get(op.from)!, model.get(op.to)!];
      t.checking += s.checking + s.savings;
      s.checking = 0;
      s.savings = 0;
      return { status: 200, body: { from: view(op.from), to: view(op.to) } };
    }
  }
}

/** A transaction of each kind in turn, on random accounts, with amounts that sometimes overdraw. */
function draw(prng: Prng, names: readonly string[], step: number): Op {
  const pick = () => names[prng.int(0, names.length - 1)]!;
  const pair = () => {
    const from = pick();
    let to = pick();
    while (to === from) to = pick();
    return { from, to };
  };
  const kinds = ['transact_savings', 'deposit_checking', 'write_check', 'send_payment', 'amalgamate', 'balance'] as const;
  switch (kinds[step % kinds.length]!) {
    case 'transact_savings':
      return { kind: 'transact_savings', name: pick(), value: prng.int(-1500, 500) };
    case 'deposit_checking':
      return { kind: 'deposit_checking', name: pick(), value: prng.int(1, 500) };
    case 'write_check':
      return { kind: 'write_check', name: pick(), value: prng.int(0, 1500) };
    case 'send_payment':
      return { kind: 'send_payment', ...pair(), value: prng.int(1, 1500) };
    case 'amalgamate':
      return { kind: 'amalgamate', ...pair() };
    case 'balance':
      return { kind: 'balance', name: pick() };
  }
}

describe('examples/smallbank on a node', () => {
  let node: StartedNode;
  const model = new Map<string, Account>();
  const call = (method: string, path: string, body?: unknown) => node.client.request(method, path, { identity: node.user, ...(body === undefined ? {} : { body }) });
  const send = (op: Op) => {
    if (op.kind === 'balance') return call('GET', `/app/balance/${op.name}`);
    const { kind, ...body } = op;
    return call('POST', `/app/${kind}`, body);
  };
  const total = () => [...model.values()].reduce((sum, a) => sum + a.checking + a.savings, 0);

  before(async () => {
    node = await startNode({ configPatch: { ledger_signatures: { tx_count: 10, delay: '20ms' } } });
    await deployApp(readBundleDirectory(join(ROOT, 'examples', 'smallbank')), [memberConnectionOf(node)], () => undefined);
  });

  after(async () => {
    await node.stop();
    removeDir(node.dir);
  });

  test('accounts are opened one by one and in a batch; a colliding batch opens none', async () => {
    const one = await call('PUT', `/app/accounts/${MARKED}`, { checking: 50, savings: 20 });
    assert.equal(one.status, 201, one.text);
    assert.deepEqual(one.body, { name: MARKED, checking: 50, savings: 20 });
    model.set(MARKED, { checking: 50, savings: 20 });
    const batch = await call('POST', '/app/accounts', { from: 0, to: 8, checking: 1000, savings: 1000 });
    assert.equal(batch.status, 201, batch.text);
    assert.deepEqual(batch.body, { created: 8 });
    for (let i = 0; i < 8; i++) model.set(String(i), { checking: 1000, savings: 1000 });

    const again = await call('PUT', `/app/accounts/${MARKED}`, { checking: 1, savings: 1 });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'AccountExists');
    // 8 and 9 are new, 7 exists: the batch is one transaction, so 8 is not opened either.
    const colliding = await call('POST', '/app/accounts', { from: 7, to: 10, checking: 1, savings: 1 });
    assert.equal(colliding.status, 409);
    assert.equal(colliding.body.error.code, 'AccountExists');
    assert.equal((await call('GET', '/app/balance/8')).status, 404);
    const tooMany = await call('POST', '/app/accounts', { from: 100, to: 126, checking: 1, savings: 1 });
    assert.equal(tooMany.status, 400);
    assert.match(tooMany.body.error.message, /from 1 to 25/);
  });

  test('every transaction type answers as the model says; money moved between accounts is conserved', async () => {
    const prng = new Prng(SEED);
    const names = [...model.keys()];
    const seen = new Map<string, number>();
    const totalOf = (name: string) => model.get(name)!.checking + model.get(name)!.savings;
    for (let step = 0; step < STEPS; step++) {
      const op = draw(prng, names, step);
      const before = total();
      const pairBefore = 'from' in op ? totalOf(op.from) + totalOf(op.to) : 0;
      const want = expected(model, op);
      const answer = await send(op);
      const where = `seed ${SEED} step ${step}: ${JSON.stringify(op)}`;
      assert.equal(answer.status, want.status, `${where}: ${answer.text}`);
      if (want.code !== undefined) assert.equal(answer.body.error.code, want.code, where);
      else assert.deepEqual(answer.body, want.body, where);
      const outcome = `${op.kind} ${answer.status}`;
      seen.set(outcome, (seen.get(outcome) ?? 0) + 1);
      if ('from' in op) {
        assert.equal(total(), before, `${where}: the model's total changed`);
        if (answer.status === 200) {
          const { from, to } = answer.body as { from: Account; to: Account };
          assert.equal(from.checking + from.savings + to.checking + to.savings, pairBefore, `${where}: the service did not conserve money`);
        }
      }
    }
    // Every type ran, and both kinds of overdraft were refused at least once.
    for (const outcome of ['transact_savings 200', 'transact_savings 400', 'deposit_checking 200', 'write_check 200', 'send_payment 200', 'send_payment 400', 'amalgamate 200', 'balance 200']) {
      assert.ok((seen.get(outcome) ?? 0) > 0, `${outcome} never happened: ${JSON.stringify([...seen])}`);
    }
    // What the service holds, read back account by account.
    let served = 0;
    for (const [name, account] of model) {
      const answer = await call('GET', `/app/balance/${name}`);
      assert.equal(answer.status, 200, answer.text);
      assert.deepEqual(answer.body, { name, ...account, total: account.checking + account.savings });
      served += answer.body.total;
    }
    assert.equal(served, total());
  });

  test('an unknown account is 404 and an overdraft 400, and neither writes anything', async () => {
    const known = '0';
    const before = (await call('GET', `/app/balance/${known}`)).body;
    for (const op of [
      { kind: 'transact_savings', name: 'nobody', value: 1 },
      { kind: 'deposit_checking', name: 'nobody', value: 1 },
      { kind: 'write_check', name: 'nobody', value: 1 },
      { kind: 'send_payment', from: known, to: 'nobody', value: 1 },
      { kind: 'send_payment', from: 'nobody', to: known, value: 1 },
      { kind: 'amalgamate', from: known, to: 'nobody' },
      { kind: 'balance', name: 'nobody' },
    ] as Op[]) {
      const answer = await send(op);
      assert.equal(answer.status, 404, JSON.stringify(op));
      assert.deepEqual(answer.body.error, { code: 'AccountNotFound', message: 'no account "nobody"' });
    }
    const savings = await send({ kind: 'transact_savings', name: known, value: -(before.savings + 1) });
    assert.equal(savings.status, 400);
    assert.equal(savings.body.error.code, 'InsufficientFunds');
    const payment = await send({ kind: 'send_payment', from: known, to: '1', value: Math.max(0, before.checking) + 1 });
    assert.equal(payment.status, 400);
    assert.equal(payment.body.error.code, 'InsufficientFunds');
    assert.deepEqual((await call('GET', `/app/balance/${known}`)).body, before, 'the refused transactions wrote nothing');

    for (const [path, body] of [
      ['/app/deposit_checking', { name: known, value: 0 }],
      ['/app/deposit_checking', { name: known, value: 1.5 }],
      ['/app/write_check', { name: known, value: -1 }],
      ['/app/send_payment', { from: known, to: known, value: 1 }],
      ['/app/amalgamate', { from: known }],
      ['/app/transact_savings', { name: known, value: 1, extra: true }],
    ] as const) {
      const answer = await call('POST', path, body);
      assert.equal(answer.status, 400, `${path} ${JSON.stringify(body)}: ${answer.text}`);
      assert.equal(answer.body.error.code, 'InvalidInput');
    }
    const notJson = await node.client.request('POST', '/app/deposit_checking', { identity: node.user, rawBody: 'not json' });
    assert.equal(notJson.body.error.code, 'InvalidJsonBody');
    const anonymous = await node.client.request('GET', `/app/balance/${known}`);
    assert.equal(anonymous.status, 401);
    assert.deepEqual((await call('GET', `/app/balance/${known}`)).body, before);
  });

  test('the balances are in private maps: no account name in clear in the ledger', async () => {
    const last = await send({ kind: 'deposit_checking', name: MARKED, value: 1 });
    assert.equal(last.status, 200);
    await waitCommitted(node, last.headers['x-covenant-transaction-id'] as string);
    const dir = join(node.dir, 'ledger');
    const ledger = Buffer.concat(readdirSync(dir).map((f) => readFileSync(join(dir, f))));
    assert.ok(ledger.includes('set_js_app'), 'the ledger files hold the deployment');
    assert.equal(ledger.includes(MARKED), false, 'an account name is in clear in the ledger');
  });
});
