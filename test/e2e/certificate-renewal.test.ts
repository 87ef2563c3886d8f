/**
 * End to end: certificates renewed by governance on a three-node network of real processes. The
 * nodes start with one-day certificates (the default); members first move the node certificates
 * close to expiry (the nodes warn), then renew them and the service certificate for 30 days. Every
 * node presents the new certificate on new TLS handshakes without a restart; clients trusting the
 * original service certificate and clients trusting the renewed one both keep working; replication
 * keeps committing; a node restarted afterwards comes back with the renewed certificate.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import tls from 'node:tls';
import { certificateValidity } from '../../src/crypto/index.js';
import { HttpsClient } from '../../src/platform/https-client.js';
import { startNetwork, until, waitCommitted } from '../../src/testing/network.js';
import { joinOptionsOf, restartNode, startJoiningNode, type StartedNode } from '../../src/testing/node-process.js';
import { applyActions } from '../../src/testing/jwt.js';

const FAST = { ledger_signatures: { delay: '20ms' }, consensus: { election_timeout: '500ms', message_timeout: '50ms' } };
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** The notAfter (ms) of the certificate `address` presents on a new TLS handshake, verified against `caPem`. */
function presentedValidTo(address: string, caPem: string): Promise<number> {
  const i = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: address.slice(0, i), port: Number(address.slice(i + 1)), ca: caPem }, () => {
      const validTo = new Date(socket.getPeerX509Certificate()!.validTo).getTime();
      socket.destroy();
      resolve(validTo);
    });
    socket.on('error', reject);
  });
}

/** Waits until every node presents a certificate valid to `validToMs` (to the second). */
async function untilPresented(nodes: StartedNode[], caPem: string, validToMs: number): Promise<void> {
  for (const node of nodes) {
    await until(`${node.address} to present a certificate valid to ${new Date(validToMs).toISOString()}`, async () =>
      (await presentedValidTo(node.address, caPem)) === validToMs ? true : undefined,
    );
  }
}

const seconds = (ms: number) => Math.floor(ms / 1000) * 1000;

async function writeAndCommit(writer: StartedNode, nodes: StartedNode[], id: number, client = writer.client): Promise<void> {
  const answer = await client.request('POST', '/app/log/private', { body: { id, msg: `message ${id}` }, identity: writer.user });
  assert.equal(answer.status, 200, answer.text);
  const txId = answer.headers['x-covenant-transaction-id'] as string;
  for (const node of nodes) await waitCommitted(node, txId);
}

describe('certificate renewal by governance', () => {
  test('renews node and service certificates close to expiry; clients, peers and a restarted node keep working', async () => {
    const network = await startNetwork(3, FAST);
    const nodes = network.nodes;
    const original = nodes[0]!.serviceCertificatePem;
    try {
      const primary = await network.primary();
      const network0 = (await primary.client.request('GET', '/node/network')).body;
      const serviceValidTo = Date.parse(network0.service_certificate_valid_to);
      assert.equal(serviceValidTo, certificateValidity(original).notAfter.getTime());
      assert.ok(serviceValidTo - Date.now() <= DAY_MS, 'the service certificate starts with the default day');
      const listed0 = (await primary.client.request('GET', '/node/network/nodes')).body.nodes as { node_id: string; certificate_valid_to: string }[];
      assert.equal(listed0.length, 3);
      for (const n of listed0) assert.ok(Date.parse(n.certificate_valid_to) - Date.now() <= DAY_MS, JSON.stringify(n));

      // Close to expiry: valid since 23 hours ago for one day, an hour left.
      const nearFrom = seconds(Date.now() - 23 * HOUR_MS);
      const near = await applyActions(primary, [{ name: 'set_all_nodes_certificate_validity', args: { valid_from: new Date(nearFrom).toISOString(), validity_period_days: 1 } }]);
      assert.equal(near.state, 'Accepted', near.failure);
      await untilPresented(nodes, original, nearFrom + DAY_MS);
      for (const node of nodes) {
        await until(`${node.address} to warn of the node certificate's expiry`, async () => (/the node certificate expires at .* members renew it/.test(node.output()) ? true : undefined));
        const metrics = (await node.client.request('GET', '/node/metrics')).body;
        assert.ok(metrics.certificates.node.seconds_until_expiry <= HOUR_MS / 1000, JSON.stringify(metrics.certificates));
        assert.equal(Date.parse(metrics.certificates.node.valid_to), nearFrom + DAY_MS);
      }

      // Renewed for 30 days, the service certificate with them.
      const from = seconds(Date.now());
      const renewed = await applyActions(primary, [
        { name: 'set_all_nodes_certificate_validity', args: { valid_from: new Date(from).toISOString(), validity_period_days: 30 } },
        { name: 'set_service_certificate_validity', args: { valid_from: new Date(from).toISOString(), validity_period_days: 30 } },
      ]);
      assert.equal(renewed.state, 'Accepted', renewed.failure);
      const validTo = from + 30 * DAY_MS;
      await untilPresented(nodes, original, validTo);
      const networkAfter = (await primary.client.request('GET', '/node/network')).body;
      assert.equal(Date.parse(networkAfter.service_certificate_valid_to), validTo);
      const renewedService: string = networkAfter.service_certificate;
      assert.notEqual(renewedService, original);
      const listed = (await primary.client.request('GET', '/node/network/nodes')).body.nodes as { node_id: string; certificate_valid_to: string }[];
      for (const n of listed) assert.equal(Date.parse(n.certificate_valid_to), validTo, n.node_id);
      // The governance views of the same records, as members see them.
      assert.equal(Date.parse((await primary.client.request('GET', '/gov/service/info')).body.certificate_valid_to), validTo);
      const govNodes = (await primary.client.request('GET', '/gov/service/nodes')).body.nodes as { certificate_valid_to: string }[];
      assert.deepEqual(govNodes.map((n) => Date.parse(n.certificate_valid_to)), [validTo, validTo, validTo]);
      for (const node of nodes) {
        await until(`${node.address} to report the renewed certificates`, async () => {
          const metrics = (await node.client.request('GET', '/node/metrics')).body.certificates;
          return Date.parse(metrics.service.valid_to) === validTo && Date.parse(metrics.node.valid_to) === validTo ? true : undefined;
        });
        assert.equal(readFileSync(join(node.dir, 'node_cert.pem'), 'utf8') !== '' && certificateValidity(readFileSync(join(node.dir, 'node_cert.pem'), 'utf8')).notAfter.getTime(), validTo);
      }
      // The first node outputs the service certificate: its file holds the renewed one.
      assert.equal(readFileSync(join(nodes[0]!.dir, 'service_cert.pem'), 'utf8'), renewedService);
      // The renewed certificates are served on the TLS handshake to clients trusting either service certificate.
      await untilPresented(nodes, renewedService, validTo);

      // Clients on new connections: trusting the original service certificate, and the renewed one.
      for (const [i, ca] of [original, renewedService].entries()) {
        const client = new HttpsClient(primary.address, ca);
        try {
          await writeAndCommit(primary, nodes, 100 + i, client);
        } finally {
          client.close();
        }
      }

      // A backup restarted after the renewal comes back with the renewed certificate and catches up.
      const backupIndex = nodes.findIndex((n) => n !== primary);
      await nodes[backupIndex]!.stop();
      const restarted = await restartNode(nodes[backupIndex]!);
      nodes[backupIndex] = restarted;
      assert.equal(await presentedValidTo(restarted.address, renewedService), validTo);
      await writeAndCommit(primary, nodes, 200);
      const read = await restarted.client.request('GET', '/app/log/private?id=200', { identity: restarted.user });
      assert.equal(read.body.msg, 'message 200');
      const restartedNetwork = (await restarted.client.request('GET', '/node/network')).body;
      assert.equal(Date.parse(restartedNetwork.service_certificate_valid_to), validTo);

      // A node joining the open service with the original copy of the service certificate, trusted
      // by members for a period of their choosing, gets its certificate for that period and the
      // renewed service certificate.
      const joinFrom = seconds(Date.now() - HOUR_MS);
      const joined = await startJoiningNode({
        ...joinOptionsOf(primary),
        configPatch: FAST,
        trustArgs: { valid_from: new Date(joinFrom).toISOString(), validity_period_days: 10 },
      });
      nodes.push(joined);
      assert.equal(await presentedValidTo(joined.address, renewedService), joinFrom + 10 * DAY_MS);
      assert.equal(Date.parse((await joined.client.request('GET', '/node/network')).body.service_certificate_valid_to), validTo);
      await until('the joined node to serve the renewed service certificate', async () => {
        const metrics = (await joined.client.request('GET', '/node/metrics')).body.certificates;
        return Date.parse(metrics.service.valid_to) === validTo ? true : undefined;
      });
      await writeAndCommit(primary, nodes, 300);
    } finally {
      await network.stopAll();
    }
  });
});
