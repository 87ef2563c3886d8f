// SmallBank, the workload CCF publishes its throughput with: customers' accounts, each with a
// checking and a savings balance (two encrypted maps keyed by the account's name, values the
// balance in decimal), and its transactions. Money enters only by opening accounts,
// deposit_checking and transact_savings, and leaves only by transact_savings and write_check:
// send_payment and amalgamate move it between accounts and conserve the total.
import { BATCH_ACCOUNTS_MAX, bodyOf, check, fail, insufficient, invalid, notFound } from './answers.js';

const checking = () => covenant.kv['smallbank.checking'];
const savings = () => covenant.kv['smallbank.savings'];
const key = (name) => covenant.strToBuf(name);

/** The account's balances, or undefined when there is no such account. */
function read(name) {
  const c = checking().get(key(name));
  if (c === undefined) return undefined;
  return { name, checking: Number(covenant.bufToStr(c)), savings: Number(covenant.bufToStr(savings().get(key(name)))) };
}

/** Writes the account's balances back; the error answer when one left the safe integers. */
function write(account) {
  if (!Number.isSafeInteger(account.checking) || !Number.isSafeInteger(account.savings)) {
    return fail(400, 'BalanceOutOfRange', 'the balances of ' + JSON.stringify(account.name) + ' would leave the safe integers');
  }
  checking().set(key(account.name), covenant.strToBuf(String(account.checking)));
  savings().set(key(account.name), covenant.strToBuf(String(account.savings)));
  return undefined;
}

/** Reads the accounts named, in order: {accounts} or {error} (404 for the first one missing). */
function readAll(...names) {
  const accounts = [];
  for (const name of names) {
    const account = read(name);
    if (account === undefined) return { error: notFound(name) };
    accounts.push(account);
  }
  return { accounts };
}

function open(name, balances) {
  if (checking().has(key(name))) return fail(409, 'AccountExists', 'account ' + JSON.stringify(name) + ' already exists');
  return write({ name, checking: balances.checking, savings: balances.savings });
}

/** PUT /accounts/{name} {checking, savings}: opens one account. */
export function create(request) {
  const name = request.params.name;
  const problem = check('name', name);
  if (problem !== undefined) return invalid('path {name}: ' + problem);
  const body = bodyOf(request, { checking: 'balance', savings: 'balance' });
  if (body.error) return body.error;
  const refused = open(name, body.value);
  if (refused) return refused;
  return { statusCode: 201, body: { name, checking: body.value.checking, savings: body.value.savings } };
}

/** POST /accounts {from, to, checking, savings}: opens the accounts named String(i), from ≤ i < to, all or none. */
export function createBatch(request) {
  const body = bodyOf(request, { from: 'index', to: 'index', checking: 'balance', savings: 'balance' });
  if (body.error) return body.error;
  const { from, to } = body.value;
  if (to <= from || to - from > BATCH_ACCOUNTS_MAX) return invalid('body: "to" - "from" is from 1 to ' + BATCH_ACCOUNTS_MAX);
  for (let i = from; i < to; i++) {
    // A refusal drops the accounts opened before it: the batch is one transaction.
    const refused = open(String(i), body.value);
    if (refused) return refused;
  }
  return { statusCode: 201, body: { created: to - from } };
}

/** GET /balance/{name}: the balances and their total (CCF's SmallBank_balance answers the total). */
export function balance(request) {
  const account = read(request.params.name);
  if (account === undefined) return notFound(request.params.name);
  return { body: { ...account, total: account.checking + account.savings } };
}

/** Validates the body, reads the accounts its `names` keys name, and hands both to `apply`. */
function transaction(request, rules, names, apply) {
  const body = bodyOf(request, rules);
  if (body.error) return body.error;
  const accountNames = names.map((k) => body.value[k]);
  if (accountNames.length === 2 && accountNames[0] === accountNames[1]) return invalid('body: "from" and "to" name two different accounts');
  const found = readAll(...accountNames);
  if (found.error) return found.error;
  const { accounts } = found;
  const answer = apply(body.value, ...accounts);
  if (answer !== undefined) return answer;
  for (const account of accounts) {
    const refused = write(account);
    if (refused) return refused;
  }
  return { body: accounts.length === 1 ? accounts[0] : { from: accounts[0], to: accounts[1] } };
}

/** POST /transact_savings {name, value}: savings += value; refused if savings would go below zero. */
export const transactSavings = (request) =>
  transaction(request, { name: 'name', value: 'amount' }, ['name'], ({ value }, account) => {
    if (account.savings + value < 0) return insufficient('the savings of ' + JSON.stringify(account.name) + ' hold ' + account.savings + ', less than ' + -value);
    account.savings += value;
    return undefined;
  });

/** POST /deposit_checking {name, value}: checking += value (value > 0). */
export const depositChecking = (request) =>
  transaction(request, { name: 'name', value: 'positive' }, ['name'], ({ value }, account) => {
    account.checking += value;
    return undefined;
  });

/** POST /send_payment {from, to, value}: moves value between checking balances; refused if from's checking holds less. */
export const sendPayment = (request) =>
  transaction(request, { from: 'name', to: 'name', value: 'positive' }, ['from', 'to'], ({ value }, source, target) => {
    if (source.checking < value) return insufficient('the checking of ' + JSON.stringify(source.name) + ' holds ' + source.checking + ', less than ' + value);
    source.checking -= value;
    target.checking += value;
    return undefined;
  });

/**
 * POST /write_check {name, value}: checking -= value, and 1 more (the overdraft penalty) when
 * checking and savings together hold less than value: checking may go below zero.
 */
export const writeCheck = (request) =>
  transaction(request, { name: 'name', value: 'nonNegative' }, ['name'], ({ value }, account) => {
    account.checking -= account.checking + account.savings < value ? value + 1 : value;
    return undefined;
  });

/** POST /amalgamate {from, to}: to's checking += from's checking + savings; both of from's become zero. */
export const amalgamate = (request) =>
  transaction(request, { from: 'name', to: 'name' }, ['from', 'to'], (_, source, target) => {
    target.checking += source.checking + source.savings;
    source.checking = 0;
    source.savings = 0;
    return undefined;
  });
