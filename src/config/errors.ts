import { CovenantError } from '../base/index.js';

/** One problem found in a configuration, located by its key path (e.g. "ledger.chunk_size"). */
export interface ConfigIssue {
  /** Dotted key path with array indices in brackets: `command.start.members[0].certificate_file`; "" for the whole file. */
  readonly path: string;
  /** One line, already naming the key path, ready to show to an operator. */
  readonly line: string;
}

/**
 * The node configuration is unusable. Every problem found is listed (one per line), so that an
 * operator fixes the file in one round instead of one error per restart.
 */
export class ConfigError extends CovenantError {
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[], header?: string) {
    const lines = issues.map((i) => i.line);
    super('InvalidConfiguration', header === undefined ? lines.join('\n') : [header, ...lines].join('\n'), 400, {
      issues: issues.map((i) => ({ path: i.path, message: i.line })),
    });
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

/** Renders a key path as operators write it: `rpc_interfaces.primary.bind_address`, `members[0]`. */
export function formatKeyPath(path: readonly PropertyKey[]): string {
  let text = '';
  for (const key of path) {
    if (typeof key === 'number') text += `[${key}]`;
    else text += text === '' ? String(key) : `.${String(key)}`;
  }
  return text;
}

/** An issue about the value at `path`: `configuration error at "ledger.chunk_size": ...`. */
export function valueIssue(path: string, detail: string): ConfigIssue {
  return { path, line: path === '' ? `configuration error: ${detail}` : `configuration error at "${path}": ${detail}` };
}

/** An issue whose detail already names the key: `configuration error: unknown key "ledger.chunksize"`. */
export function keyIssue(path: string, detail: string): ConfigIssue {
  return { path, line: `configuration error: ${detail}` };
}
