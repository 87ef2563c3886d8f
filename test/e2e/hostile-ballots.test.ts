/**
 * End to end: hostile ballots against a three-node network with the default consensus timeouts.
 * A ballot looping over an expensive built-in, and one allocating without end, fail the proposal
 * with a clear reason; the primary stays primary (no election), keeps answering a client while the
 * ballot runs, and its memory comes back.
 *
 * The longest gap in a client's answers and the primary's RSS are printed as diagnostics (the
 * figures the sandbox limits are about); the assertions are on outcomes and memory, not time.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { memberConnectionOf, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, type TestNetwork } from '../../src/testing/network.js';
import { GovRequestFailed, propose, vote, type MemberConnection } from '../../src/cli/member.js';
import { HttpsClient } from '../../src/platform/https-client.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const POLL_INTERVAL_MS = 20;
const MIB = 1024 * 1024;

/** Resident memory of a process, from /proc (Linux). */
function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  assert.ok(match, 'VmRSS in /proc/<pid>/status');
  return Number(match[1]) * 1024;
}

/**
 * Polls GET /node/commit every POLL_INTERVAL_MS; reports the answers, the longest gap between two
 * and the node's highest RSS seen meanwhile.
 */
function pollCommit(node: StartedNode): { stop(): Promise<{ answers: number; failures: number; longestGapMs: number; rssPeakBytes: number }> } {
  const client = new HttpsClient(node.address, node.serviceCertificatePem);
  let running = true;
  let answers = 0;
  let failures = 0;
  let longestGapMs = 0;
  let lastAnswerMs = performance.now();
  let rssPeakBytes = 0;
  const loop = (async () => {
    while (running) {
      rssPeakBytes = Math.max(rssPeakBytes, rssBytes(node.process.pid!));
      const answer = await client.request('GET', '/node/commit', { timeoutMs: 30_000 }).catch(() => undefined);
      const nowMs = performance.now();
      if (answer?.status === 200) {
        answers++;
        longestGapMs = Math.max(longestGapMs, nowMs - lastAnswerMs);
        lastAnswerMs = nowMs;
      } else {
        failures++;
      }
      await sleep(POLL_INTERVAL_MS);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      client.close();
      return { answers, failures, longestGapMs: Math.round(longestGapMs), rssPeakBytes };
    },
  };
}

describe('hostile ballots against a three-node network', () => {
  let network: TestNetwork;
  let primary: StartedNode;
  let member: MemberConnection;

  before(async () => {
    network = await startNetwork(3, { ledger_signatures: { delay: '20ms' } });
    primary = await network.primary();
    // member0 of the first node, talking to the primary.
    member = { ...memberConnectionOf(network.nodes[0]!), address: primary.address };
  });

  after(async () => {
    await network.stopAll();
  });

  const consensus = async () => (await primary.client.request('GET', '/node/consensus', { timeoutMs: 30_000 })).body as { current_view: number; role: string };

  const attack = async (t: { diagnostic(message: string): void }, name: string, ballot: string, reason: RegExp) => {
    const viewBefore = (await consensus()).current_view;
    const rssBeforeBytes = rssBytes(primary.process.pid!);
    const proposal = await propose(member, [{ name: 'trigger_snapshot' }]);
    assert.equal(proposal.body.state, 'Open');
    const poller = pollCommit(primary);
    await sleep(200);
    // The ballot's module runs when the ballot is checked at submission, and its vote when the
    // proposal resolves: a module that itself overruns the budget (building a large array at top
    // level does on a slow turn) is refused at submission instead. Either way it fails with the reason.
    const voted = await vote(member, proposal.body.proposal_id as string, ballot).catch((e: unknown) => {
      if (e instanceof GovRequestFailed && e.code === 'InvalidBallot') return e;
      throw e;
    });
    await sleep(200);
    const polled = await poller.stop();
    const rssAfterBytes = rssBytes(primary.process.pid!);
    t.diagnostic(
      `${name}: longest gap between /node/commit answers ${polled.longestGapMs} ms (${polled.answers} answers, ${polled.failures} failed); ` +
        `primary RSS ${Math.round(rssBeforeBytes / MIB)} MiB before, ${Math.round(polled.rssPeakBytes / MIB)} MiB at most during, ${Math.round(rssAfterBytes / MIB)} MiB after`,
    );

    // The ballot fails the proposal with the reason (or is refused with it); nothing else is affected.
    if (voted instanceof GovRequestFailed) {
      assert.match(voted.message, reason);
      const info = (await primary.client.request('GET', `/gov/members/proposals/${String(proposal.body.proposal_id)}`)).body as { state: string };
      assert.equal(info.state, 'Open', 'a refused ballot leaves the proposal as it was');
    } else {
      assert.equal(voted.body.state, 'Failed');
      assert.match(voted.body.failure.reason, reason);
      assert.match(voted.body.vote_failures[member.memberId].reason, reason);
    }
    // The client kept being answered, and nobody started an election.
    assert.ok(polled.answers > 0);
    assert.equal(polled.failures, 0);
    const after = await consensus();
    assert.equal(after.role, 'Primary');
    assert.equal(after.current_view, viewBefore, 'no election happened');
    assert.equal((await network.primary()).address, primary.address);
    return { rssBeforeBytes, rssAfterBytes };
  };

  test('a ballot looping over indexOf of a million-element array fails with a Timeout', async (t) => {
    const ballot = 'const a = []; for (let i = 0; i < 1e6; i++) a.push(i); export function vote() { for (;;) a.indexOf(-1) }';
    await attack(t, 'indexOf loop', ballot, /Timeout/);
  });

  test('a ballot looping over lastIndexOf of a ten-million-character string fails with a Timeout', async (t) => {
    const ballot = "const s = 'x'.repeat(1e7); export function vote() { for (;;) s.lastIndexOf('y') }";
    await attack(t, 'lastIndexOf loop', ballot, /Timeout/);
  });

  test('a ballot allocating without end fails, and the primary keeps its memory', async (t) => {
    const ballot = 'export function vote() { let a = []; while (true) a.push(new Array(1e6).fill(1)) }';
    const { rssBeforeBytes, rssAfterBytes } = await attack(t, 'allocation', ballot, /OutOfMemory|Timeout/);
    // Before the WebAssembly memory was capped, this ballot grew the primary by about 2 GB, for good.
    assert.ok(rssAfterBytes - rssBeforeBytes < 200 * MIB, `the primary grew by ${Math.round((rssAfterBytes - rssBeforeBytes) / MIB)} MiB`);
    // A normal proposal still goes through.
    const proposal = await propose(member, [{ name: 'trigger_snapshot' }]);
    const voted = await vote(member, proposal.body.proposal_id as string, 'export function vote() { return true }');
    assert.equal(voted.body.state, 'Accepted');
  });
});
