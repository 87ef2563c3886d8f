/**
 * The member CLI's request path, against real HTTPS servers: a node that cannot be reached is
 * skipped for the next one of network.json, and while the nodes know no primary (an election) the
 * request is sent again until one answers, so `covenant member propose` works through an election.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createSelfSignedCertificate, generateEcKeyPair } from '../../src/crypto/index.js';
import { GovRequestFailed, govRequest, type MemberConnection } from '../../src/cli/member.js';

interface FakeNode {
  address: string;
  /** The paths asked, in order. */
  seen: string[];
  /** The answers still to give before answering 200 (each `NoPrimary` or another status). */
  script: (number | 'NoPrimary')[];
  close(): Promise<void>;
}

let certificatePem = '';
let privateKeyPem = '';

before(async () => {
  const keys = generateEcKeyPair('P-256');
  privateKeyPem = keys.privateKeyPem;
  certificatePem = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: 'Covenant Service', validityDays: 1, isCa: true, subjectAltNames: ['iPAddress:127.0.0.1'] });
});

const nodes: FakeNode[] = [];
after(async () => {
  for (const node of nodes) await node.close();
});

async function fakeNode(script: (number | 'NoPrimary')[]): Promise<FakeNode> {
  const node: FakeNode = { address: '', seen: [], script, close: async () => {} };
  const server = https.createServer({ key: privateKeyPem, cert: certificatePem }, (req, res) => {
    node.seen.push(req.url ?? '');
    const next = node.script.shift();
    res.setHeader('content-type', 'application/json');
    if (next === 'NoPrimary') {
      res.statusCode = 503;
      res.end(JSON.stringify({ error: { code: 'NoPrimary', message: 'no primary is known at the moment: retry shortly' } }));
    } else if (next !== undefined) {
      res.statusCode = next;
      res.end(JSON.stringify({ error: { code: 'ServiceUnavailable', message: 'not now' } }));
    } else {
      res.statusCode = 200;
      res.setHeader('x-covenant-transaction-id', '2.7');
      res.end(JSON.stringify({ answered: true }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  node.address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  node.close = () => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  nodes.push(node);
  return node;
}

function connection(address: string, fallbackAddresses: string[]): MemberConnection {
  return { address, fallbackAddresses, caPem: certificatePem, certificatePem: '', privateKeyPem: '', memberId: '00' };
}

test('while no node knows a primary the request goes round the nodes again until one answers', async () => {
  const a = await fakeNode(['NoPrimary', 'NoPrimary', 'NoPrimary']);
  const b = await fakeNode(['NoPrimary', 'NoPrimary']);
  const answer = await govRequest(connection(a.address, [b.address]), 'POST', '/gov/members/proposals:create', new Uint8Array([1]));
  assert.equal(answer.status, 200);
  assert.equal(answer.transactionId, '2.7');
  assert.deepEqual(answer.body, { answered: true });
  // Rounds: a, b (both NoPrimary); a, b (both NoPrimary); a (NoPrimary), b answers.
  assert.equal(a.seen.length, 3);
  assert.equal(b.seen.length, 3);
});

test('a node that cannot be reached is skipped; any other refusal is the answer, not retried', async () => {
  const gone = await fakeNode([]);
  await gone.close();
  const busy = await fakeNode([503]);
  await assert.rejects(
    govRequest(connection(gone.address, [busy.address]), 'GET', '/gov/service/info'),
    (e: unknown) => e instanceof GovRequestFailed && e.status === 503 && e.code === 'ServiceUnavailable',
  );
  assert.equal(busy.seen.length, 1, 'a 503 other than NoPrimary is reported as it is');
  await assert.rejects(govRequest(connection(gone.address, []), 'GET', '/gov/service/info'), /no node answered: .*ECONNREFUSED/);
});
