/**
 * Node.js flags every node process is started with (by `covenant sandbox`, the tests and the
 * benchmarks; operators starting `covenant node` themselves pass them the same way, see
 * docs/configuration.md).
 *
 * --max-semi-space-size=64: a transaction's objects live until its signature commits (about
 * `ledger_signatures.delay`), so with V8's default 16 MiB young generation most of them are
 * copied twice and promoted before they die. 64 MiB semi-spaces let them die young.
 * --min-semi-space-size=64: the young generation stays at that size instead of shrinking between
 * bursts and faulting its pages in again.
 * Together: 10–35% less process CPU per write on the in-process write path across our runs
 * (`node dist/bench/write-path.js` with and without them; the spread is the machine's). The cost
 * is up to 128 MiB of young generation held by every node process.
 */
export const NODE_PROCESS_FLAGS: readonly string[] = ['--max-semi-space-size=64', '--min-semi-space-size=64'];
