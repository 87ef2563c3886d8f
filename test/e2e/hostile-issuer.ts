/**
 * A token issuer's web server that misbehaves on purpose, for end-to-end tests: loopback HTTPS on
 * port 0 with its own CA. In mode `keys` it answers OpenID discovery and a JWKS of its first
 * `published` EC keys (it holds their private keys, so a test signs tokens any way it likes); the
 * other modes answer every request badly: a redirect or a 503 with an empty body, a reset before
 * answering, a 200 whose body is cut by a reset, or a 200 whose body trickles one byte a second.
 */
import https from 'node:https';
import nodeCrypto from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { CompactSign } from 'jose';
import { createEndorsedCertificate, createSelfSignedCertificate, generateEcKeyPair } from '../../src/crypto/index.js';

export type IssuerMode = 'keys' | 'redirect' | 'empty-503' | 'reset' | 'cut' | 'trickle';

export interface HostileIssuer {
  issuer: string;
  readonly caPem: string;
  mode: IssuerMode;
  /** How many of the keys the JWKS publishes (k0, k1, ...). */
  published: number;
  /** The JWKS of the first `count` keys. */
  jwks(count: number): { keys: Record<string, unknown>[] };
  /** A token signed by key k0 over exactly this payload text (any JSON, even one JavaScript cannot write). */
  sign(payloadText: string): Promise<string>;
  /** Requests answered so far, by mode. */
  readonly answered: Record<string, number>;
  close(): Promise<void>;
}

export async function startHostileIssuer(keyCount: number): Promise<HostileIssuer> {
  const caKeys = generateEcKeyPair('P-256');
  const caPem = await createSelfSignedCertificate({ keyPair: caKeys, subjectCommonName: 'hostile issuer CA', validityDays: 2, isCa: true });
  const serverKeys = generateEcKeyPair('P-256');
  const certPem = await createEndorsedCertificate({
    subjectPublicKey: serverKeys.publicKey,
    subjectCommonName: '127.0.0.1',
    subjectAltNames: ['iPAddress:127.0.0.1'],
    issuerCertificatePem: caPem,
    issuerPrivateKey: caKeys.privateKey,
    validityDays: 2,
  });
  const pairs = Array.from({ length: keyCount }, () => nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }));
  const publicJwks = pairs.map((p, i) => ({ ...p.publicKey.export({ format: 'jwk' }), kid: `k${i}`, alg: 'ES256', use: 'sig' }));
  const sockets = new Set<Socket>();
  const trickles = new Set<NodeJS.Timeout>();
  const state: HostileIssuer = {
    issuer: '',
    caPem,
    mode: 'keys',
    published: keyCount,
    answered: {},
    jwks: (count) => ({ keys: publicJwks.slice(0, count) }),
    sign: (payloadText) =>
      new CompactSign(new TextEncoder().encode(payloadText)).setProtectedHeader({ alg: 'ES256', kid: 'k0' }).sign(pairs[0]!.privateKey),
    async close() {
      for (const t of trickles) clearInterval(t);
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = https.createServer({ key: serverKeys.privateKeyPem, cert: certPem }, (req, res) => {
    state.answered[state.mode] = (state.answered[state.mode] ?? 0) + 1;
    switch (state.mode) {
      case 'keys': {
        const body = req.url?.startsWith('/.well-known/openid-configuration') ? { issuer: state.issuer, jwks_uri: `${state.issuer}/jwks` } : state.jwks(state.published);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
        return;
      }
      case 'redirect':
        res.writeHead(302, { location: `${state.issuer}/elsewhere`, 'content-length': '0' });
        res.end();
        return;
      case 'empty-503':
        res.writeHead(503, { 'content-length': '0' });
        res.end();
        return;
      case 'reset':
        reset(req.socket.remotePort);
        return;
      case 'cut':
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"issuer":"');
        setTimeout(() => reset(req.socket.remotePort), 50);
        return;
      case 'trickle': {
        res.writeHead(200, { 'content-type': 'application/json' });
        const timer = setInterval(() => res.write(' '), 1000);
        trickles.add(timer);
        res.on('close', () => {
          clearInterval(timer);
          trickles.delete(timer);
        });
        return;
      }
    }
  });
  // The TCP sockets under the TLS ones, by the client's port: a reset (RST) is sent on those.
  const byPort = new Map<number, Socket>();
  const reset = (port: number | undefined) => byPort.get(port ?? -1)?.resetAndDestroy();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    const port = s.remotePort ?? -1;
    byPort.set(port, s);
    s.on('close', () => {
      sockets.delete(s);
      if (byPort.get(port) === s) byPort.delete(port);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  state.issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}
