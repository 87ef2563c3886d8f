// The service's built-in message log written as an application bundle: the same routes, the same
// answers, and the same maps ("records" encrypted, "public:records" in clear; key: the id in
// decimal, value: {"msg": ...} as JSON), so the two can take over from each other.
//
// A public record's write also binds a claim into its transaction's receipt: the SHA-256 of
// {"id":<id>,"msg":<msg>} as JSON.stringify writes it (README.md shows the round trip). A private
// record binds none: the claims digest is in clear in the ledger, and the digest of a short
// private message would let whoever reads the ledger files test guesses of it.
import { badRequest, idOf, notFound } from './validation.js';

const MAPS = { private: 'records', public: 'public:records' };

function post(scope, request) {
  let body;
  try {
    body = request.body.json();
  } catch (e) {
    return badRequest('InvalidJsonBody', 'request body is not valid JSON: ' + e.message);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return badRequest('InvalidInput', 'body: expected an object {id, msg}');
  const extra = Object.keys(body).filter((k) => k !== 'id' && k !== 'msg');
  if (extra.length > 0) return badRequest('InvalidInput', 'body: unrecognized key(s) ' + extra.join(', '));
  if (!Number.isSafeInteger(body.id) || body.id < 0) return badRequest('InvalidInput', 'body "id": expected a non-negative integer');
  if (typeof body.msg !== 'string') return badRequest('InvalidInput', 'body "msg": expected a string');
  covenant.kv[MAPS[scope]].set(covenant.strToBuf(String(body.id)), covenant.jsonCompatibleToBuf({ msg: body.msg }));
  if (scope === 'public') covenant.rpc.setClaimsDigest(covenant.crypto.sha256(covenant.jsonCompatibleToBuf({ id: body.id, msg: body.msg })));
  return { body: true };
}

function get(scope, request) {
  const id = idOf(request);
  if (typeof id !== 'number') return id;
  const value = covenant.kv[MAPS[scope]].get(covenant.strToBuf(String(id)));
  if (value === undefined) return notFound(id);
  return { body: { msg: covenant.bufToJsonCompatible(value).msg } };
}

function remove(scope, request) {
  const id = idOf(request);
  if (typeof id !== 'number') return id;
  if (!covenant.kv[MAPS[scope]].delete(covenant.strToBuf(String(id)))) return notFound(id);
  return { body: true };
}

export const postPrivate = (request) => post('private', request);
export const getPrivate = (request) => get('private', request);
export const deletePrivate = (request) => remove('private', request);
export const postPublic = (request) => post('public', request);
export const getPublic = (request) => get('public', request);
export const deletePublic = (request) => remove('public', request);
