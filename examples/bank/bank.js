// A small bank: accounts with private balances, transfers between them. Balances live in an
// encrypted map; the number of transfers is public. A transfer binds a digest of what it did into
// its transaction's receipt (setClaimsDigest), so that both parties can prove it later.
import { asAmount, conflict, fail, forbidden, jsonBody, notFound } from './answers.js';

const accounts = () => covenant.kv['bank.accounts'];
const counters = () => covenant.kv['public:bank.counters'];
const key = (id) => covenant.strToBuf(id);

function readAccount(id) {
  const value = accounts().get(key(id));
  return value === undefined ? undefined : covenant.bufToJsonCompatible(value);
}

function writeAccount(id, account) {
  accounts().set(key(id), covenant.jsonCompatibleToBuf(account));
}

export function openAccount(request) {
  const id = request.params.id;
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) return fail(400, 'InvalidInput', 'an account id has 1 to 64 letters, digits, _ or -');
  if (readAccount(id) !== undefined) return conflict('AccountExists', 'account ' + id + ' already exists');
  writeAccount(id, { owner: request.caller.id, balance: 0 });
  return { statusCode: 201, body: { id, owner: request.caller.id, balance: 0 } };
}

export function getAccount(request) {
  const account = readAccount(request.params.id);
  if (account === undefined) return notFound(request.params.id);
  const caller = request.caller.id ?? (request.caller.jwt && request.caller.jwt.subject);
  if (account.owner !== caller) return forbidden('only the owner of account ' + request.params.id + ' may read it');
  return { body: { id: request.params.id, ...account } };
}

export function deposit(request) {
  const body = jsonBody(request);
  if (body.error) return body.error;
  const amount = asAmount(body.value.amount);
  if (typeof amount !== 'number') return amount;
  const account = readAccount(request.params.id);
  if (account === undefined) return notFound(request.params.id);
  if (account.owner !== request.caller.id) return forbidden('only the owner of account ' + request.params.id + ' may deposit to it');
  account.balance += amount;
  writeAccount(request.params.id, account);
  return { body: { id: request.params.id, balance: account.balance } };
}

export function transfer(request) {
  const body = jsonBody(request);
  if (body.error) return body.error;
  const { from, to } = body.value;
  const amount = asAmount(body.value.amount);
  if (typeof amount !== 'number') return amount;
  if (typeof from !== 'string' || typeof to !== 'string' || from === to) return fail(400, 'InvalidInput', '"from" and "to" are two different account ids');
  const source = readAccount(from);
  const target = readAccount(to);
  if (source === undefined) return notFound(from);
  if (target === undefined) return notFound(to);
  if (source.owner !== request.caller.id) return forbidden('only the owner of account ' + from + ' may transfer from it');
  // Written first, refused after: the refusal (a 409) drops these writes, as nothing was agreed.
  source.balance -= amount;
  target.balance += amount;
  writeAccount(from, source);
  writeAccount(to, target);
  if (source.balance < 0) return conflict('InsufficientFunds', 'account ' + from + ' holds ' + (source.balance + amount) + ', less than ' + amount);
  const countKey = key('transfers');
  const count = counters().has(countKey) ? covenant.bufToJsonCompatible(counters().get(countKey)) : 0;
  counters().set(countKey, covenant.jsonCompatibleToBuf(count + 1));
  const claims = { from, to, amount, number: count + 1 };
  covenant.rpc.setClaimsDigest(covenant.crypto.sha256(covenant.jsonCompatibleToBuf(claims)));
  return { body: { ...claims, balance: source.balance } };
}

export function transferCount() {
  const value = counters().get(key('transfers'));
  return { body: { transfers: value === undefined ? 0 : covenant.bufToJsonCompatible(value) } };
}
