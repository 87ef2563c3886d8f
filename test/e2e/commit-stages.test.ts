/**
 * End to end: three node processes; writes asking `x-covenant-consistency: committed` on the
 * primary are timed stage by stage, and GET /node/metrics (text) gives the histogram of each
 * stage, one series a stage with fixed buckets, with one observation per committed write, and
 * medians in the order a commit round takes them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startNetwork } from '../../src/testing/network.js';
import { COMMIT_STAGES } from '../../src/node/write/commit-stages.js';

/** `covenant_commit_stage_seconds_{count,sum}` by stage. */
function stageSeries(text: string, suffix: 'count' | 'sum'): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(`^covenant_commit_stage_seconds_${suffix}\\{stage="(\\w+)"\\} (\\S+)$`, 'gm'))) out.set(m[1]!, Number(m[2]));
  return out;
}

test('committed writes: the primary reports the time to each stage of their commit round in /node/metrics', async () => {
  const network = await startNetwork(3);
  try {
    const primary = await network.primary();
    const writes = 12;
    for (let id = 0; id < writes; id++) {
      const answer = await primary.client.request('POST', '/app/log/private', {
        body: { id, msg: `staged ${id}` },
        identity: primary.user,
        headers: { 'x-covenant-consistency': 'committed' },
      });
      assert.equal(answer.status, 200, answer.text);
    }
    // A default write is not timed.
    assert.equal((await primary.client.request('POST', '/app/log/private', { body: { id: 99, msg: 'default' }, identity: primary.user })).status, 200);
    const text = (await primary.client.request('GET', '/node/metrics', { headers: { accept: 'text/plain' } })).text;
    const counts = stageSeries(text, 'count');
    const sums = stageSeries(text, 'sum');
    // The primary's own syncs are not on the commit path (two backups' copies commit without
    // them): observed only for the writes whose answer came after them.
    const ownSyncs = new Set<string>(['synced', 'signature_synced']);
    for (const stage of COMMIT_STAGES) {
      if (ownSyncs.has(stage)) assert.ok((counts.get(stage) ?? 0) <= writes, `${stage}: at most one observation per committed write`);
      else assert.equal(counts.get(stage), writes, `${stage}: one observation per committed write`);
    }
    assert.match(text, /^covenant_commit_stage_seconds_bucket\{le="0\.001",stage="executed"\} \d+$/m, 'fixed buckets');
    // One write at a time: each reaches its milestones in the round's order (means, on the node's clock).
    const mean = (stage: string) => sums.get(stage)! / writes;
    for (const [earlier, later] of [
      ['executed', 'framed'],
      ['framed', 'appended'],
      ['signed', 'signature_appended'],
      ['backup_acked', 'committed'],
      ['committed', 'answered'],
    ] as const) {
      assert.ok(mean(earlier) <= mean(later), `${earlier} (${mean(earlier)} s) before ${later} (${mean(later)} s)`);
    }
    // A backup holds none of it: the stages are the primary's.
    const backup = network.nodes.find((n) => n !== primary)!;
    const backupText = (await backup.client.request('GET', '/node/metrics', { headers: { accept: 'text/plain' } })).text;
    assert.equal(stageSeries(backupText, 'count').get('executed') ?? 0, 0);
  } finally {
    await network.stopAll();
  }
});
