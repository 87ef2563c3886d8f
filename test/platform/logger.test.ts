import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { MemoryLogger, nullLogger } from '../../src/base/log.js';
import { createLogger, type LoggerOptions } from '../../src/platform/logger.js';

const FIXED_NOW = Date.parse('2026-11-20T12:00:00.123Z');

/** A logger writing into memory; `lines()` returns what was written so far. */
function capture(options: LoggerOptions) {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger({ now: () => FIXED_NOW, ...options, destination: stream });
  const lines = () => chunks.join('').split('\n').filter((l) => l !== '');
  return { logger, lines, json: () => lines().map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** File name and line of the statement that calls this, as the stack (through source maps when on) reports them. */
function here(): { file: string; number: number } {
  const frame = new Error().stack!.split('\n')[2]!;
  const match = /([^\s()/\\]+):(\d+):\d+\)?$/.exec(frame)!;
  return { file: match[1]!, number: Number(match[2]) };
}

/** This file's name in stack frames: logger.test.ts with source maps, logger.test.js without. */
const THIS_FILE = here().file;
const THIS_FILE_RE = THIS_FILE.replace(/\./g, '\\.');

test('Json lines carry exactly the spec fields plus the extra ones', () => {
  const { logger, json } = capture({ format: 'Json', level: 'info' });
  // One expression, so that the call and here() share a line in emitted JavaScript too.
  const line = (logger.info('node started', { node_id: 'ab12', port: 8000 }), here().number);
  const [event] = json();
  assert.match(THIS_FILE, /^logger\.test\.[jt]s$/);
  assert.deepEqual(event, {
    h_ts: '2026-11-20T12:00:00.123Z',
    file: THIS_FILE,
    number: line,
    level: 'info',
    msg: 'node started',
    node_id: 'ab12',
    port: 8000,
  });
});

test('Json levels use the spec names, and levels below the threshold are dropped', () => {
  const { logger, json } = capture({ format: 'Json', level: 'debug' });
  logger.trace('t');
  logger.debug('d');
  logger.info('i');
  logger.fail('f');
  logger.fatal('x');
  assert.deepEqual(json().map((e) => [e['level'], e['msg']]), [['debug', 'd'], ['info', 'i'], ['fail', 'f'], ['fatal', 'x']]);
  assert.equal(logger.enabled('trace'), false);
  assert.equal(logger.enabled('debug'), true);
  assert.equal(logger.enabled('fail'), true);
});

test('children add bindings; tag() marks application logs; enclave children add e_ts', () => {
  const { logger, json } = capture({ format: 'Json', name: 'node0' });
  const host = logger.child({ node_id: 'ab12' });
  host.info('host side');
  host.tag().info('application event', { id: 3 });
  host.child({ component: 'kv' }, { enclave: true }).info('trusted side');
  const [hostEvent, appEvent, enclaveEvent] = json();
  assert.equal(hostEvent!['name'], 'node0');
  assert.equal(hostEvent!['node_id'], 'ab12');
  assert.equal('e_ts' in hostEvent!, false, 'host-side lines have no e_ts');
  assert.equal('tag' in hostEvent!, false);
  assert.equal(appEvent!['tag'], 'app');
  assert.equal(appEvent!['id'], 3);
  assert.equal(enclaveEvent!['e_ts'], '2026-11-20T12:00:00.123Z');
  assert.equal(enclaveEvent!['h_ts'], '2026-11-20T12:00:00.123Z');
  assert.equal(enclaveEvent!['component'], 'kv');
  assert.equal(enclaveEvent!['node_id'], 'ab12');
});

test('Json lines stay one line per event and errors keep their message', () => {
  const { logger, lines, json } = capture({ format: 'Json' });
  logger.fail('two\nlines', { err: Object.assign(new Error('disk full'), { code: 'ENOSPC' }) });
  assert.equal(lines().length, 1);
  const [event] = json();
  assert.equal(event!['msg'], 'two\nlines');
  const err = event!['err'] as Record<string, unknown>;
  assert.equal(err['message'], 'disk full');
  assert.equal(err['code'], 'ENOSPC');
  assert.equal(err['type'], 'Error');
  assert.match(String(err['stack']), /disk full/);
});

test('Text lines read: time, level, [file:line], message, key=value', () => {
  const { logger, lines } = capture({ format: 'Text', level: 'trace' });
  const infoLine = (logger.info('message', { key: 'value' }), here().number);
  const fields = { address: '127.0.0.1:8000', reason: 'in use', count: 2, nested: { a: [1] } };
  const failLine = (logger.child({ node: 'n0' }).tag().fail('cannot "bind"', fields), here().number);
  logger.trace('multi\nline');
  const [info, fail, trace] = lines();
  assert.equal(info, `2026-11-20T12:00:00.123Z info  [${THIS_FILE}:${infoLine}] message key=value`);
  assert.equal(
    fail,
    `2026-11-20T12:00:00.123Z fail  [${THIS_FILE}:${failLine}] cannot "bind" node=n0 tag=app address=127.0.0.1:8000 reason="in use" count=2 nested={"a":[1]}`,
  );
  assert.match(trace!, new RegExp(`^2026-11-20T12:00:00\\.123Z trace \\[${THIS_FILE_RE}:\\d+\\] multi\\\\nline$`));
  assert.equal(lines().length, 3);
});

test('Text is the default format and info the default level', () => {
  const { logger, lines } = capture({});
  logger.debug('hidden');
  logger.info('shown');
  assert.deepEqual(lines().length, 1);
  assert.match(lines()[0]!, new RegExp(`^\\S+Z info {2}\\[${THIS_FILE_RE}:\\d+\\] shown$`));
});

test('repeated call sites keep reporting their own line', () => {
  const { logger, json } = capture({ format: 'Json' });
  const expected: number[] = [];
  for (let i = 0; i < 3; i++) {
    expected.push((logger.info('first', { i }), here().number));
    expected.push((logger.info('second', { i }), here().number));
  }
  assert.notEqual(expected[0], expected[1]);
  assert.deepEqual(json().map((e) => e['number']), expected);
});

test('caller capture can be turned off', () => {
  const { logger, json } = capture({ format: 'Json', caller: false });
  logger.info('cheap');
  const [event] = json();
  assert.equal('file' in event!, false);
  assert.equal('number' in event!, false);
  const text = capture({ caller: false });
  text.logger.info('cheap');
  assert.equal(text.lines()[0], '2026-11-20T12:00:00.123Z info  cheap');
});

test('a file descriptor destination receives the lines, buffered ones after flush', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'covenant-log-'));
  try {
    const file = path.join(dir, 'node.log');
    const fd = fs.openSync(file, 'w');
    try {
      const syncLogger = createLogger({ format: 'Json', destination: fd });
      syncLogger.info('first');
      assert.equal(JSON.parse(fs.readFileSync(file, 'utf8').trim())['msg'], 'first', 'synchronous lines are written before returning');
      const buffered = createLogger({ format: 'Text', destination: fd, sync: false });
      buffered.info('second');
      buffered.flush();
      // A buffered writer whose descriptor is not ready yet writes with its next turn instead of in
      // flush(): wait (bounded) for the line before closing the descriptor under it.
      const deadline = Date.now() + 5000;
      while (fs.readFileSync(file, 'utf8').trim().split('\n').length < 2 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        buffered.flush();
      }
      const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
      assert.equal(lines.length, 2);
      assert.match(lines[1]!, new RegExp(` info {2}\\[${THIS_FILE_RE}:\\d+\\] second$`));
    } finally {
      fs.closeSync(fd);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('MemoryLogger records events with bindings, tag and enclave flag; nullLogger drops them', () => {
  const memory = new MemoryLogger('debug');
  memory.trace('dropped');
  memory.child({ node_id: 'n1' }, { enclave: true }).tag().fail('cleanup skipped', { cycle: 2 });
  assert.deepEqual(memory.entries, [{ level: 'fail', msg: 'cleanup skipped', fields: { node_id: 'n1', cycle: 2 }, tag: 'app', enclave: true }]);
  assert.deepEqual(memory.messages('fail'), ['cleanup skipped']);
  const bounded = new MemoryLogger('trace', 2);
  bounded.info('a');
  bounded.info('b');
  bounded.info('c');
  assert.deepEqual(bounded.messages(), ['b', 'c']);
  assert.equal(nullLogger.enabled('fatal'), false);
  assert.equal(nullLogger.child({}).tag(), nullLogger);
});
