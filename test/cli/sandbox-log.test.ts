/** What the sandbox prints of a node that did not start: its last error lines, in either log format, or the end of its log. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lastErrorLines } from '../../src/cli/sandbox-nodes.js';

test('lastErrorLines picks the fail and fatal lines of a text or JSON log, else its tail', () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-sandbox-log-'));
  try {
    const text = join(dir, 'text.log');
    writeFileSync(
      text,
      [
        '2026-01-01T00:00:00.000Z info  [join.ts:1] join request sent',
        '2026-01-01T00:00:01.000Z fail  [join.ts:2] snapshot snapshot_28_29.committed fetched from 127.0.0.1:1 is invalid: cert is not endorsed',
        '2026-01-01T00:00:02.000Z info  [join.ts:1] retrying',
        '2026-01-01T00:00:03.000Z fatal [node-command.ts:3] node failed to start: JoinRetriesExhausted: the join failed 10 times in a row the same way',
        '2026-01-01T00:00:04.000Z info  [lifecycle.ts:4] stopping',
      ].join('\n') + '\n',
    );
    const printed = lastErrorLines(text, 5);
    assert.match(printed, /is invalid: cert is not endorsed/);
    assert.match(printed, /JoinRetriesExhausted/);
    assert.doesNotMatch(printed, /retrying|stopping/);
    const json = join(dir, 'json.log');
    writeFileSync(json, `${JSON.stringify({ level: 'info', msg: 'a' })}\n${JSON.stringify({ level: 'fail', msg: 'the reason' })}\n`);
    assert.match(lastErrorLines(json, 5), /the reason/);
    assert.doesNotMatch(lastErrorLines(json, 5), /"msg":"a"/);
    const quiet = join(dir, 'quiet.log');
    writeFileSync(quiet, 'line 1\nline 2\n');
    assert.equal(lastErrorLines(quiet, 1), '  line 2', 'without errors, the end of the log');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
