/**
 * The simulators' command-line checks (`npm run sim`, `npm run sim:decision`): a bad argument
 * prints its reason and the command's usage to stderr, and the process exits with status 2.
 */
export class SimArgs {
  constructor(private readonly usageText: string) {}

  usage(message: string): never {
    process.stderr.write(`${message}\n${this.usageText}`);
    process.exit(2);
  }

  /** A non-negative integer of at least `min`. */
  integer(text: string | undefined, name: string, min: number): number {
    if (text === undefined || !/^\d+$/.test(text)) this.usage(`${name} needs a non-negative integer`);
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < min) this.usage(`${name} must be at least ${min}`);
    return value;
  }

  /** "N" or "MIN..MAX", within lowest..highest. */
  range(text: string | undefined, name: string, lowest: number, highest: number): { min: number; max: number } {
    const match = /^(\d+)(?:\.\.(\d+))?$/.exec(text ?? '');
    if (!match) this.usage(`${name} takes N or MIN..MAX`);
    const min = Number(match[1]);
    const max = Number(match[2] ?? match[1]);
    if (min < lowest || max > highest || min > max) this.usage(`${name} must lie within ${lowest}..${highest}`);
    return { min, max };
  }

  /** A comma-separated, non-empty list of names from `allowed`. */
  list<T extends string>(text: string | undefined, allowed: readonly T[], name: string): T[] {
    const items = (text ?? '').split(',').filter(Boolean);
    if (items.length === 0) this.usage(`${name} takes ${allowed.join(',')}`);
    for (const item of items) if (!allowed.includes(item as T)) this.usage(`${name} takes ${allowed.join(',')}`);
    return items as T[];
  }
}
