/**
 * End to end: what a joining node must prove, and what the network refuses. A target whose
 * certificate does not name the joiner's target host, an untrusted host data, a quote that does
 * not bind the joiner's key, and a joiner without the key it claims are all refused with a reason
 * and no effect on the network; garbage on the node-to-node port harms nobody; a Pending node
 * that goes silent is removed after pending_node_timeout.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateEcKeyPair, generateIdentity } from '../../src/crypto/index.js';
import { createVirtualQuote, defaultHostData, codeMeasurement } from '../../src/attestation/virtual.js';
import { publicKeyDer } from '../../src/crypto/index.js';
import { HttpsClient } from '../../src/platform/https-client.js';
import { joinOptionsOf, removeDir, startJoiningNode, waitForExit, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until } from '../../src/testing/network.js';

const FAST = { ledger_signatures: { delay: '20ms' }, consensus: { election_timeout: '500ms', message_timeout: '50ms' } };

async function nodeCount(node: StartedNode): Promise<number> {
  return (await node.client.request('GET', '/node/network/nodes')).body.nodes.length;
}

describe('joining', () => {
  test('refusals leave the network unchanged', async () => {
    const network = await startNetwork(1, { ...FAST, pending_node_timeout: '1s' });
    const first = network.nodes[0]!;
    try {
      const [, port] = first.address.split(':');

      // The target's certificate names 127.0.0.1 only: joining through "localhost" must fail.
      const wrongHost = await startJoiningNode({
        target: `localhost:${port}`,
        serviceCertificatePem: first.serviceCertificatePem,
        user: first.user,
        member: first.member,
        configPatch: FAST,
        waitUntilJoined: false,
      });
      assert.notEqual(await waitForExit(wrongHost.process), 0);
      assert.match(wrongHost.output(), /JoinTargetNotTrusted/);
      assert.match(wrongHost.output(), /localhost/);
      removeDir(wrongHost.dir);

      // A joiner whose host data members never registered.
      const untrusted = await startJoiningNode({
        ...joinOptionsOf(first),
        configPatch: FAST,
        waitUntilJoined: false,
        env: { COVENANT_VIRTUAL_HOST_DATA: createHash('sha256').update('unknown code').digest('hex') },
      });
      assert.notEqual(await waitForExit(untrusted.process), 0);
      assert.match(untrusted.output(), /UntrustedHostData/);
      removeDir(untrusted.dir);

      // Raw join requests: a quote that binds another key, and a body key the TLS client does not hold.
      const identity = await generateIdentity({ commonName: 'joiner' });
      const client = new HttpsClient(first.address, first.serviceCertificatePem);
      const other = generateEcKeyPair('P-384');
      const version = (await first.client.request('GET', '/node/version')).body.version as string;
      const base = {
        public_key: identity.publicKeyPem,
        node_data: null,
        rpc_interfaces: { primary: { bind_address: '127.0.0.1:1', published_address: '127.0.0.1:1', enabled_operator_features: [] } },
        node_to_node_interface: { bind_address: '127.0.0.1:2', published_address: '127.0.0.1:2' },
        startup_seqno: 0,
        subject_alt_names: ['iPAddress:127.0.0.1'],
      };
      const badQuote = await client.request('POST', '/node/join', {
        identity,
        body: { ...base, quote_info: createVirtualQuote(publicKeyDer(other.publicKey), codeMeasurement(version), defaultHostData()) },
      });
      assert.equal(badQuote.status, 403);
      assert.equal(badQuote.body.error.code, 'InvalidQuote');
      const otherCode = await client.request('POST', '/node/join', {
        identity,
        body: { ...base, quote_info: createVirtualQuote(publicKeyDer(identity.publicKeyPem), codeMeasurement('some other build'), defaultHostData()) },
      });
      assert.equal(otherCode.status, 403, 'a measurement the service does not trust');
      assert.equal(otherCode.body.error.code, 'UntrustedMeasurement');
      const own = (await first.client.request('GET', '/node/quotes/self')).body.measurement as string;
      assert.deepEqual((await first.client.request('GET', '/gov/service/join-policy')).body.measurements, [own], 'genesis trusts the first node’s measurement');
      for (const document of ['null', '5', '"text"', 'not json']) {
        const malformed = await client.request('POST', '/node/join', {
          identity,
          body: { ...base, quote_info: { format: 'Insecure_Virtual', quote: Buffer.from(document).toString('base64'), endorsements: '' } },
        });
        assert.equal(malformed.status, 403, `a quote document ${document} is refused, not an internal error`);
        assert.equal(malformed.body.error.code, 'InvalidQuote');
      }
      const stranger = await generateIdentity({ commonName: 'stranger' });
      const notHolder = await client.request('POST', '/node/join', {
        identity: stranger,
        body: { ...base, quote_info: createVirtualQuote(publicKeyDer(identity.publicKeyPem), codeMeasurement(version), defaultHostData()) },
      });
      assert.equal(notHolder.status, 401);
      const garbage = await client.request('POST', '/node/join', { identity, rawBody: '{"public_key": 5' });
      assert.equal(garbage.status, 400);
      // A request that would otherwise be admitted (Pending) but records too much: each part is bounded.
      const quote_info = createVirtualQuote(publicKeyDer(identity.publicKeyPem), codeMeasurement(version), defaultHostData());
      const address = `${'h'.repeat(400)}:1`;
      const interfaces = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`i${i}`, base.rpc_interfaces.primary]));
      for (const [what, body, field] of [
        ['node_data of 20 KiB', { ...base, quote_info, node_data: { blob: 'x'.repeat(20 * 1024) } }, /node_data.*16384 bytes/],
        ['a 400-character node-to-node address', { ...base, quote_info, node_to_node_interface: { bind_address: address, published_address: address } }, /node_to_node_interface/],
        ['17 RPC interfaces', { ...base, quote_info, rpc_interfaces: interfaces }, /rpc_interfaces.*at most 16/],
      ] as const) {
        const tooLarge = await client.request('POST', '/node/join', { identity, body });
        assert.equal(tooLarge.status, 400, `${what}: ${tooLarge.text}`);
        assert.equal(tooLarge.body.error.code, 'InvalidInput', what);
        assert.match(tooLarge.body.error.message, field, what);
      }
      client.close();

      // Garbage on the node-to-node port: the connection is dropped, the node keeps working.
      const consensus = await first.client.request('GET', '/node/consensus');
      const n2nAddress = Object.values(consensus.body.configs[0].nodes as Record<string, { address: string }>)[0]!.address;
      const [n2nHost, n2nPort] = n2nAddress.split(':');
      await new Promise<void>((resolve) => {
        const socket = net.connect(Number(n2nPort), n2nHost!, () => socket.write(Buffer.alloc(4096, 0xff)));
        socket.on('error', () => resolve());
        socket.on('close', () => resolve());
        setTimeout(() => socket.destroy(), 500);
      });

      assert.equal(await nodeCount(first), 1, 'no refused joiner was recorded');
      const write = await first.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'still fine' }, identity: first.user });
      assert.equal(write.status, 200);
    } finally {
      await network.stopAll();
    }
  });

  test('after opening, a joiner is Pending; a silent Pending node is removed after pending_node_timeout', async () => {
    const network = await startNetwork(1, { ...FAST, pending_node_timeout: '1s' });
    const first = network.nodes[0]!;
    try {
      assert.equal((await first.client.request('GET', '/node/network')).body.service_status, 'Open', 'startNetwork opened the service');
      const joiner = await startJoiningNode({
        ...joinOptionsOf(first),
        configPatch: FAST,
        waitUntilJoined: false,
      });
      network.nodes.push(joiner);
      await until('a Pending node', async () => {
        const pending = await first.client.request('GET', '/node/network/nodes?status=Pending');
        return pending.body.nodes.length === 1 ? true : undefined;
      });
      // A client reaches the Pending node with its self-signed certificate (node_certificate_file) as CA.
      const selfSigned = readFileSync(join(joiner.dir, 'node_cert.pem'), 'utf8');
      const viaSelfSigned = new HttpsClient(joiner.address, selfSigned);
      const state = await viaSelfSigned.request('GET', '/node/state');
      assert.equal(state.status, 200);
      assert.notEqual(state.body.state, 'PartOfNetwork');
      assert.equal((await viaSelfSigned.request('GET', '/node/self_signed_certificate')).body.self_signed_certificate, selfSigned);
      // It holds no service record yet: it reports the status the target gave in its join answer.
      assert.equal((await viaSelfSigned.request('GET', '/node/network')).body.service_status, 'Open');
      viaSelfSigned.close();
      // While it keeps polling it stays.
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal((await first.client.request('GET', '/node/network/nodes?status=Pending')).body.nodes.length, 1);
      await joiner.kill();
      await until('the silent Pending node to be removed', async () => {
        const pending = await first.client.request('GET', '/node/network/nodes?status=Pending');
        return pending.body.nodes.length === 0 ? true : undefined;
      });
      assert.equal(await nodeCount(first), 1);
    } finally {
      await network.stopAll();
    }
  });
});
