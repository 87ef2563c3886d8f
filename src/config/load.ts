/**
 * Loading `node.json`: parse, apply defaults, resolve paths, read the JSON data files, and check
 * the rules that span several keys. Loading has no side effects: it reads files and writes none,
 * so a bad configuration leaves the node's folder exactly as it was.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { errorMessage } from '../base/index.js';
import { ConfigError, type ConfigIssue, formatKeyPath, keyIssue, valueIssue } from './errors.js';
import { parseHostPort } from './fields.js';
import { nodeConfigSchema, type ParsedNodeConfigFile } from './schema.js';
import type { CommandConfig, NodeConfig, RpcInterfaceConfig } from './types.js';

/** Reads and parses a `node.json` file; relative paths in it are resolved against its folder. */
export function loadNodeConfig(file: string): NodeConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError([valueIssue('', `cannot read configuration file ${file} (${errorMessage(e)})`)]);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ConfigError([valueIssue('', `configuration file ${file} is not valid JSON (${errorMessage(e)})`)]);
  }
  try {
    return parseNodeConfig(json, path.dirname(path.resolve(file)));
  } catch (e) {
    if (e instanceof ConfigError) {
      const count = e.issues.length === 1 ? '1 problem' : `${e.issues.length} problems`;
      throw new ConfigError(e.issues, `invalid configuration file ${file} (${count}):`);
    }
    throw e;
  }
}

/**
 * Parses a configuration already read as JSON. `baseDir` is the folder that relative paths are
 * resolved against (the configuration file's folder). Throws a ConfigError listing every problem.
 */
export function parseNodeConfig(json: unknown, baseDir: string): NodeConfig {
  const result = nodeConfigSchema(baseDir).safeParse(json, { reportInput: true });
  const issues: ConfigIssue[] = result.success ? [] : result.error.issues.flatMap((i) => describeIssue(i, []));
  issues.push(...checkRaw(json));
  const data = readDataFiles(json, baseDir, issues);
  if (!result.success || issues.length > 0) throw new ConfigError(issues);
  const config = finish(result.data, data);
  issues.push(...checkParsed(config));
  if (issues.length > 0) throw new ConfigError(issues);
  return config;
}

type Issue = z.core.$ZodIssue;

function describeIssue(issue: Issue, prefix: readonly PropertyKey[]): ConfigIssue[] {
  const at = [...prefix, ...issue.path];
  const where = formatKeyPath(at);
  const input = (issue as { input?: unknown }).input;
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((key) => {
        const keyPath = formatKeyPath([...at, key]);
        return keyIssue(keyPath, `unknown key "${keyPath}"`);
      });
    case 'invalid_type':
      if (input === undefined) return [keyIssue(where, `"${where}" is required`)];
      // Schemas with a clearer word for a wrong type give their own message.
      if (!issue.message.startsWith('Invalid input')) return [valueIssue(where, issue.message)];
      return [valueIssue(where, `expected ${typeName(issue.expected)}, got ${describeValue(input)}`)];
    case 'invalid_value':
      return [keyIssue(where, `"${where}" must be one of ${issue.values.map(String).join(', ')} (got ${describeValue(input)})`)];
    case 'too_small':
      return [valueIssue(where, boundText(issue, 'at least', input))];
    case 'too_big':
      return [valueIssue(where, boundText(issue, 'at most', input))];
    case 'invalid_union': {
      const wrongTypeOnly = (branch: Issue[]) => branch.every((i) => i.path.length === 0 && i.code === 'invalid_type');
      const closest = issue.errors.find((branch) => !wrongTypeOnly(branch));
      if (closest !== undefined) return closest.flatMap((i) => describeIssue(i, at));
      const expected = issue.errors.flatMap((branch) => branch.map((i) => (i.code === 'invalid_type' ? typeName(i.expected) : '')));
      if (input === undefined) return [keyIssue(where, `"${where}" is required`)];
      return [valueIssue(where, `expected ${[...new Set(expected)].filter(Boolean).join(' or ')}, got ${describeValue(input)}`)];
    }
    default:
      return [valueIssue(where, issue.message)];
  }
}

function boundText(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig, word: string, input: unknown): string {
  const bound = 'minimum' in issue ? issue.minimum : issue.maximum;
  if (issue.message !== '' && !issue.message.startsWith('Too ')) return issue.message;
  if (issue.origin === 'array') return `needs ${word} ${bound} ${Number(bound) === 1 ? 'entry' : 'entries'}`;
  if (issue.origin === 'string') return `must have ${word} ${bound} characters`;
  return `must be ${word} ${bound} (got ${describeValue(input)})`;
}

function typeName(expected: string): string {
  switch (expected) {
    // Every number in node.json is an integer, and zod reports z.int() as expecting "number".
    case 'int':
    case 'number':
      return 'an integer';
    case 'object':
    case 'record':
      return 'an object';
    case 'array':
      return 'an array';
    default:
      return `a ${expected}`;
  }
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Rules spanning several keys, checked on the raw file so that they are reported with type errors. */
function checkRaw(json: unknown): ConfigIssue[] {
  if (!isObject(json)) return [];
  const issues: ConfigIssue[] = [];
  const command = json['command'];
  if (isObject(command)) {
    const section = { Start: 'start', Join: 'join' }[String(command['type'])];
    if (section !== undefined && command[section] === undefined) {
      issues.push(keyIssue(`command.${section}`, `"command.${section}" is required when "command.type" is ${String(command['type'])}`));
    }
  }
  if (json['service_certificate_file'] !== undefined && isObject(command) && command['service_certificate_file'] !== undefined) {
    issues.push(
      keyIssue('service_certificate_file', '"service_certificate_file" and "command.service_certificate_file" name the same file: give one of them'),
    );
  }
  const cleanup = json['files_cleanup'];
  const ledger = json['ledger'];
  if (isObject(cleanup) && cleanup['max_committed_ledger_chunks'] !== undefined) {
    const readOnly = isObject(ledger) ? ledger['read_only_directories'] : undefined;
    if (!Array.isArray(readOnly) || readOnly.length === 0) {
      issues.push(
        valueIssue(
          'files_cleanup.max_committed_ledger_chunks',
          'needs at least one "ledger.read_only_directories" entry: committed chunks are deleted only when an identical copy is kept there',
        ),
      );
    }
  }
  return issues;
}

const DATA_FILE_KEYS = { node_data_json_file: 'node_data', service_data_json_file: 'service_data' } as const;

/** Reads the JSON data files named by the configuration; problems are added to `issues`. */
function readDataFiles(json: unknown, baseDir: string, issues: ConfigIssue[]): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  if (!isObject(json)) return data;
  for (const [key, target] of Object.entries(DATA_FILE_KEYS)) {
    const relative = json[key];
    if (typeof relative !== 'string' || relative === '') continue;
    const file = path.resolve(baseDir, relative);
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (e) {
      issues.push(valueIssue(key, `cannot read ${file} (${errorMessage(e)})`));
      continue;
    }
    try {
      data[target] = JSON.parse(text);
    } catch (e) {
      issues.push(valueIssue(key, `${file} is not valid JSON (${errorMessage(e)})`));
    }
  }
  return data;
}

function finish(parsed: ParsedNodeConfigFile, data: Record<string, unknown>): NodeConfig {
  const { command: parsedWithDefault, rpc_interfaces: parsedInterfaces, node_to_node_interface: n2n, service_certificate_file: topLevel, ...rest } = parsed;
  const parsedCommand = topLevel === undefined ? parsedWithDefault : { ...parsedWithDefault, service_certificate_file: topLevel };
  let command: CommandConfig;
  const { start, join, recover } = parsedCommand;
  if (parsedCommand.type === 'Start' && start !== undefined) command = { ...parsedCommand, type: 'Start', start };
  else if (parsedCommand.type === 'Join' && join !== undefined) command = { ...parsedCommand, type: 'Join', join };
  else if (parsedCommand.type === 'Recover') {
    command = { ...parsedCommand, type: 'Recover', recover: recover ?? { initial_service_certificate_validity_days: 1 } };
  } else throw new Error(`command section missing for ${parsedCommand.type}: checkRaw lets no such file through`);

  const rpc_interfaces: Record<string, RpcInterfaceConfig> = {};
  const entries: [string, Omit<RpcInterfaceConfig, 'published_address'> & { published_address?: string | undefined }][] =
    Array.isArray(parsedInterfaces)
      ? parsedInterfaces.map(({ name, ...entry }, i) => [name ?? `interface_${i}`, entry])
      : Object.entries(parsedInterfaces);
  for (const [name, entry] of entries) {
    rpc_interfaces[name] = { ...entry, published_address: entry.published_address ?? entry.bind_address };
  }
  return {
    ...rest,
    command,
    rpc_interfaces,
    node_to_node_interface: { ...n2n, published_address: n2n.published_address ?? n2n.bind_address },
    ...data,
  };
}

/** Rules on parsed values (durations in ms, addresses): only reachable once the file parsed. */
function checkParsed(config: NodeConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];

  const bound = new Map<string, string>();
  const binds: [string, string][] = [
    ...Object.entries(config.rpc_interfaces).map(([name, i]): [string, string] => [`rpc_interfaces.${name}.bind_address`, i.bind_address]),
    ['node_to_node_interface.bind_address', config.node_to_node_interface.bind_address],
  ];
  for (const [key, text] of binds) {
    const parsed = parseHostPort(text);
    // Port 0 asks the system for a fresh port, so those never collide.
    if (typeof parsed === 'string' || parsed.port === 0) continue;
    const other = bound.get(text);
    if (other !== undefined) issues.push(valueIssue(key, `"${text}" is already the bind address of "${other}"`));
    else bound.set(text, key);
  }

  if (config.consensus.message_timeout >= config.consensus.election_timeout) {
    issues.push(
      valueIssue(
        'consensus.message_timeout',
        `must be shorter than "consensus.election_timeout" (${config.consensus.message_timeout}ms >= ${config.consensus.election_timeout}ms), or followers start elections against a live primary`,
      ),
    );
  }
  return issues;
}
