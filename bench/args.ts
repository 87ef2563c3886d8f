/** The benches' command-line numbers: `--name value`, or `fallback` when absent or not a number. */
export function numberArg(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  return at === -1 ? fallback : Number(process.argv[at + 1]) || fallback;
}
