/**
 * Token-authenticated writes against certificate-authenticated writes on one node, in the same
 * run: a manual issuer with an ES256 key is registered, one token is signed, and the built-in
 * load generator writes alternately with the user certificate and with the bearer token
 * (C T T C ...), so that drift of the machine falls on both. Prints one JSON line per
 * measurement and a summary with the ratio (target ≥ 0.9).
 *
 *   npm run bench:jwt [-- --duration 4 --rounds 2 --connections 32]
 */
import nodeCrypto from 'node:crypto';
import { SignJWT } from 'jose';
import { runLoad } from './load.js';
import { removeDir, startNode } from '../src/testing/node-process.js';
import { mustApply } from '../src/testing/jwt.js';
import { numberArg } from './args.js';

const durationMs = numberArg('--duration', 4) * 1000;
const rounds = numberArg('--rounds', 2);
const connections = numberArg('--connections', 32);

const node = await startNode({ configPatch: { logging: { level: 'fail' } } });
try {
  const { privateKey, publicKey } = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const issuer = 'https://bench.example';
  await mustApply(node, [{ name: 'set_jwt_issuer', args: { issuer, jwks: { keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'bench' }] } } }]);
  const token = await new SignJWT({ iss: issuer, sub: 'bench', exp: Math.floor(Date.now() / 1000) + 3600 }).setProtectedHeader({ alg: 'ES256', kid: 'bench' }).sign(privateKey);
  const check = await node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'x' }, headers: { authorization: `Bearer ${token}` } });
  if (check.status !== 200) throw new Error(`a token write failed: ${check.status} ${check.text}`);

  const i = node.address.lastIndexOf(':');
  const host = node.address.slice(0, i);
  const port = Number(node.address.slice(i + 1));
  const body = JSON.stringify({ id: 7, msg: 'x'.repeat(200) });
  const request = (auth: string) =>
    Buffer.from(
      `POST /app/log/private HTTP/1.1\r\nhost: ${node.address}\r\nconnection: keep-alive\r\n${auth}` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  const byCert = request('');
  const byToken = request(`authorization: Bearer ${token}\r\n`);
  const measure = async (kind: 'cert' | 'token', ms: number) => {
    const target = kind === 'cert'
      ? { host, port, ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem }
      : { host, port, ca: node.serviceCertificatePem };
    const raw = kind === 'cert' ? byCert : byToken;
    return runLoad(target, { connections, durationMs: ms, request: () => raw });
  };
  await measure('cert', 1500);
  await measure('token', 1500);
  const totals = { cert: [] as number[], token: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    const order: ('cert' | 'token')[] = r % 2 === 0 ? ['cert', 'token'] : ['token', 'cert'];
    for (const kind of order) {
      const result = await measure(kind, durationMs);
      const ok = Math.round((result.requestsPerSecond * (result.requests - result.non2xx - result.errors)) / Math.max(1, result.requests));
      totals[kind].push(ok);
      console.log(JSON.stringify({ bench: 'jwt-auth', auth: kind, writes_per_s: ok, p50_ms: result.latencyP50Ms, p99_ms: result.latencyP99Ms, non2xx: result.non2xx, errors: result.errors }));
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const cert = Math.round(mean(totals.cert));
  const tok = Math.round(mean(totals.token));
  console.log(JSON.stringify({ bench: 'jwt-auth-summary', cert_writes_per_s: cert, token_writes_per_s: tok, ratio: Math.round((tok / cert) * 100) / 100, target: 0.9 }));
} finally {
  await node.stop();
  removeDir(node.dir);
}
