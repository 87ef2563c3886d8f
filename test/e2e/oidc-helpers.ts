/**
 * A real OpenID Connect provider (oidc-provider) for end-to-end tests, in the test process on
 * loopback HTTPS (port 0) with its own CA. It issues JWT access tokens by the client credentials
 * grant (resource indicators make access tokens JWTs); its signing key can be rotated, and it can
 * be made unreachable or to answer oversized documents.
 */
import https from 'node:https';
import nodeCrypto from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import Provider from 'oidc-provider';
import { createEndorsedCertificate, createSelfSignedCertificate, generateEcKeyPair } from '../../src/crypto/index.js';

export const RESOURCE = 'urn:covenant:app';
const CLIENT_ID = 'covenant-client';
const CLIENT_SECRET = 'a-client-secret-long-enough-for-the-provider';

export type ProviderMode = 'up' | 'down' | 'oversized-discovery' | 'oversized-jwks';

export interface TestProvider {
  readonly issuer: string;
  readonly caPem: string;
  kid: string;
  mode: ProviderMode;
  /** A new signing key (new kid); the old one is no longer published. */
  rotate(): void;
  token(): Promise<string>;
  close(): Promise<void>;
}

function makeProvider(issuer: string, kid: string): Provider {
  const { privateKey } = nodeCrypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
  return new Provider(issuer, {
    clients: [{ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, grant_types: ['client_credentials'], redirect_uris: [], response_types: [], scope: 'log' }],
    jwks: { keys: [jwk as never] },
    scopes: ['log'],
    ttl: { ClientCredentials: 600 },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => RESOURCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({ scope: 'log', audience: RESOURCE, accessTokenFormat: 'jwt', accessTokenTTL: 600, jwt: { sign: { alg: 'RS256' } } }),
      },
    },
  });
}

export async function startProvider(maxBytes: number): Promise<TestProvider> {
  const caKeys = generateEcKeyPair('P-256');
  const caPem = await createSelfSignedCertificate({ keyPair: caKeys, subjectCommonName: 'test provider CA', validityDays: 2, isCa: true });
  const serverKeys = generateEcKeyPair('P-256');
  const certPem = await createEndorsedCertificate({
    subjectPublicKey: serverKeys.publicKey,
    subjectCommonName: '127.0.0.1',
    subjectAltNames: ['iPAddress:127.0.0.1'],
    issuerCertificatePem: caPem,
    issuerPrivateKey: caKeys.privateKey,
    validityDays: 2,
  });
  let current: Provider | undefined;
  let generation = 0;
  const sockets = new Set<Socket>();
  const oversized = JSON.stringify({ padding: 'x'.repeat(maxBytes + 1024) });
  const state = {
    issuer: '',
    caPem,
    kid: 'key-0',
    mode: 'up' as ProviderMode,
    rotate() {
      generation++;
      state.kid = `key-${generation}`;
      current = makeProvider(state.issuer, state.kid);
    },
    async token(): Promise<string> {
      const body = new URLSearchParams({ grant_type: 'client_credentials', scope: 'log', resource: RESOURCE }).toString();
      const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = https.request(`${state.issuer}/token`, {
          method: 'POST',
          ca: caPem,
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}`,
          },
        }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.on('error', reject);
        req.end(body);
      });
      if (answer.status !== 200) throw new Error(`token endpoint: ${answer.status} ${answer.text}`);
      return (JSON.parse(answer.text) as { access_token: string }).access_token;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = https.createServer({ key: serverKeys.privateKeyPem, cert: certPem }, (req, res) => {
    if (state.mode === 'down') {
      req.socket.destroy();
      return;
    }
    if (state.mode === 'oversized-discovery' && req.url?.startsWith('/.well-known/openid-configuration')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(oversized);
      return;
    }
    if (state.mode === 'oversized-jwks' && req.url?.startsWith('/jwks')) {
      // No content-length: the fetcher must cut the body at its limit.
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      res.end(oversized);
      return;
    }
    void current!.callback()(req, res);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  state.issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  current = makeProvider(state.issuer, state.kid);
  return state;
}
