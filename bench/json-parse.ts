/**
 * Cost of parsing request bodies (parseExternalJson, on the write path) next to bare JSON.parse.
 * Prints one JSON object per body: ns per parse for each. Run after a build:
 *   node dist/bench/json-parse.js [iterations]
 */
import { performance } from 'node:perf_hooks';
import { parseExternalJson } from '../src/base/json.js';

const iterations = Number(process.argv[2] ?? 1_000_000);

const bodies: Record<string, string> = {
  // A typical application write: about 100 bytes.
  'write 100 B': JSON.stringify({ id: 42, msg: 'the quick brown fox jumps over the lazy dog', tags: ['a', 'b'], ok: true }),
  // \u escapes (one a surrogate pair) and other escapes in the text: the slower checks run.
  'escaped 100 B': String.raw`{"id":42,"msg":"caf\u00e9 \"quoted\" \ud83d\ude00 line\nbreak \\ end","n":[1,2,3]}`,
  'string 64 KB': JSON.stringify({ id: 1, msg: 'x'.repeat(64 * 1024) }),
  'nested 1 KB': JSON.stringify({ a: Array.from({ length: 20 }, (_, i) => ({ k: i, v: `value ${i}`, f: i % 2 === 0 })) }),
};

function nsPerOp(parse: (text: string) => unknown, text: string, ops: number): number {
  // Warm up, so that both parsers are measured optimised.
  for (let i = 0; i < Math.min(ops, 50_000); i++) parse(text);
  const start = performance.now();
  let sink = 0;
  for (let i = 0; i < ops; i++) if (parse(text) !== null) sink++;
  const ns = ((performance.now() - start) * 1e6) / ops;
  if (sink !== ops) throw new Error('unexpected null');
  return ns;
}

for (const [name, text] of Object.entries(bodies)) {
  const ops = Math.max(1000, Math.floor((iterations * 100) / Math.max(100, text.length)));
  const bare = nsPerOp((t) => JSON.parse(t) as unknown, text, ops);
  const external = nsPerOp((t) => parseExternalJson(t), text, ops);
  console.log(JSON.stringify({ body: name, bytes: text.length, ops, json_parse_ns: Math.round(bare), parse_external_json_ns: Math.round(external) }));
}
