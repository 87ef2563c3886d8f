import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ConfigError,
  defaultNodeConfig,
  loadNodeConfig,
  MINIMAL_NODE_CONFIG_INPUT,
  nodeConfigJsonSchema,
  parseNodeConfig,
  parseHostPort,
  deepMerge,
} from '../../src/config/index.js';

function withTempDir(fn: (dir: string) => void): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'covenant-config-'));
  try {
    fn(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Parses `minimal + fragment` and returns the ConfigError lines, failing if it parsed. */
function errorsOf(fragment: unknown, baseDir = os.tmpdir()): string[] {
  try {
    parseNodeConfig(deepMerge(MINIMAL_NODE_CONFIG_INPUT as unknown, fragment), baseDir);
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    assert.equal(e.code, 'InvalidConfiguration');
    return e.message.split('\n');
  }
  assert.fail('configuration was accepted');
}

function assertOneLineMatches(lines: string[], pattern: RegExp): void {
  assert.ok(lines.some((l) => pattern.test(l)), `no line matches ${pattern}:\n${lines.join('\n')}`);
}

test('defaults are applied and units converted', () => {
  const config = defaultNodeConfig({}, '/srv/node0');
  assert.equal(config.command.type, 'Start');
  assert.equal(config.command.service_certificate_file, path.resolve('/srv/node0', 'service_cert.pem'));
  assert.equal(config.node_certificate_file, path.resolve('/srv/node0', 'node_cert.pem'));
  assert.deepEqual(config.node_certificate, { curve_id: 'Secp384R1', initial_validity_days: 1 }, 'no names: they come from the published addresses');
  assert.deepEqual(config.rpc_interfaces['primary'], {
    bind_address: '127.0.0.1:0',
    published_address: '127.0.0.1:0',
    enabled_operator_features: [],
    max_body_size: 1024 * 1024,
    max_open_sessions: 1000,
    tls_handshake_timeout: 10_000,
    first_request_timeout: 10_000,
  });
  assert.deepEqual(config.node_to_node_interface, {
    bind_address: '127.0.0.1:0',
    published_address: '127.0.0.1:0',
    handshake_timeout: 5000,
    max_unauthenticated_connections: 256,
  });
  // Absent: the node's default (src/node/limits.ts) applies (max_pipelined_requests is absent above likewise).
  assert.equal(config.max_waiting_work_size, undefined);
  assert.deepEqual(config.ledger, { directory: path.resolve('/srv/node0', 'ledger'), read_only_directories: [], chunk_size: 5 * 1024 * 1024, durability: 'Synced' });
  assert.deepEqual(config.snapshots, { directory: path.resolve('/srv/node0', 'snapshots'), tx_count: 10_000, time_interval: 0, min_tx_count: 1, min_interval: 10_000, min_ledger_fraction: 0.5 });
  assert.deepEqual(config.files_cleanup, { interval: 30_000, max_snapshots: 10 });
  assert.deepEqual(config.ledger_signatures, { tx_count: 5000, delay: 100 });
  assert.deepEqual(config.consensus, { election_timeout: 1000, message_timeout: 100 });
  assert.equal(config.pending_node_timeout, 3_600_000);
  assert.deepEqual(config.jwt, { key_refresh_interval: 1_800_000, key_refresh_max_response_size: 1024 * 1024, key_refresh_timeout: 30_000 });
  assert.deepEqual(config.logging, { format: 'Text', level: 'info' });
  assert.equal(config.sealing_recovery, undefined);
  assert.deepEqual(config.output_files, {});
  assert.equal(config.node_data, undefined);
  if (config.command.type !== 'Start') assert.fail('not a Start command');
  assert.deepEqual(config.command.start, {
    members: [{ certificate_file: path.resolve('/srv/node0', 'member0_cert.pem') }],
    users: [],
    constitution_files: [],
    service_configuration: {},
    initial_service_certificate_validity_days: 1,
  });
});

test('join and recover sections get their defaults', () => {
  const join = defaultNodeConfig({ command: { type: 'Join', join: { target_rpc_address: 'node0.example.com:8000' } } });
  assert.equal(join.command.type, 'Join');
  if (join.command.type === 'Join') {
    assert.deepEqual(join.command.join, { target_rpc_address: 'node0.example.com:8000', retry_timeout: 1000, fetch_recent_snapshot: true });
  }
  const recover = defaultNodeConfig({ command: { type: 'Recover' } });
  assert.equal(recover.command.type, 'Recover');
  if (recover.command.type === 'Recover') assert.deepEqual(recover.command.recover, { initial_service_certificate_validity_days: 1 });
});

test('durations, sizes and explicit values are converted', () => {
  const config = defaultNodeConfig({
    ledger: { chunk_size: '64KB' },
    snapshots: { time_interval: '2s', tx_count: 7 },
    consensus: { election_timeout: '1h', message_timeout: '30min' },
    pending_node_timeout: '0s',
    jwt: { key_refresh_max_response_size: 4096 },
    rpc_interfaces: { primary: { bind_address: '[::1]:8443', published_address: 'node0.example.com:443', max_body_size: '5MB' } },
    sealing_recovery: {
      location: { name: 'n0', address: '127.0.0.1:9000' },
      recovery_decision_protocol: { expected_locations: [{ name: 'n1', address: '127.0.0.1:9001' }], failover_timeout: '2000ms' },
    },
  });
  assert.equal(config.ledger.chunk_size, 65536);
  assert.equal(config.snapshots.time_interval, 2000);
  assert.equal(config.snapshots.tx_count, 7);
  assert.equal(config.consensus.election_timeout, 3_600_000);
  assert.equal(config.consensus.message_timeout, 1_800_000);
  assert.equal(config.pending_node_timeout, 0, '"0s" disables the pending node timeout');
  assert.equal(config.jwt.key_refresh_max_response_size, 4096);
  assert.equal(config.rpc_interfaces['primary']!.bind_address, '[::1]:8443');
  assert.equal(config.rpc_interfaces['primary']!.published_address, 'node0.example.com:443');
  assert.equal(config.rpc_interfaces['primary']!.max_body_size, 5 * 1024 * 1024);
  assert.equal(config.sealing_recovery?.recovery_decision_protocol?.failover_timeout, 2000);
});

test('the waiting-work budget, pipelining and node-to-node caps are read, and their floors enforced', () => {
  const config = defaultNodeConfig({
    max_waiting_work_size: '2MB',
    rpc_interfaces: { primary: { max_pipelined_requests: 4 } },
    node_to_node_interface: { handshake_timeout: '750ms', max_unauthenticated_connections: 10 },
  });
  assert.equal(config.max_waiting_work_size, 2 * 1024 * 1024);
  assert.equal(config.rpc_interfaces['primary']!.max_pipelined_requests, 4);
  assert.equal(config.node_to_node_interface.handshake_timeout, 750);
  assert.equal(config.node_to_node_interface.max_unauthenticated_connections, 10);
  const lines = errorsOf({ max_waiting_work_size: '512KB', rpc_interfaces: { primary: { max_pipelined_requests: 0 } }, node_to_node_interface: { max_unauthenticated_connections: 1 } });
  assertOneLineMatches(lines, /max_waiting_work_size.*too small: at least 1048576 bytes/);
  assertOneLineMatches(lines, /max_pipelined_requests/);
  assertOneLineMatches(lines, /max_unauthenticated_connections/);
});

test('an array of RPC interfaces is named interface_<i> unless entries carry a name', () => {
  const config = defaultNodeConfig({
    rpc_interfaces: [
      { bind_address: '127.0.0.1:8000', enabled_operator_features: ['LedgerChunkRead'] },
      { bind_address: '127.0.0.1:8001', name: 'operator' },
    ],
  });
  assert.deepEqual(Object.keys(config.rpc_interfaces), ['interface_0', 'operator']);
  assert.deepEqual(config.rpc_interfaces['interface_0']!.enabled_operator_features, ['LedgerChunkRead']);
  assert.equal(config.rpc_interfaces['operator']!.published_address, '127.0.0.1:8001');
  assert.equal('name' in config.rpc_interfaces['operator']!, false);
});

test('relative paths resolve against the configuration file folder, absolute ones stay', () => {
  withTempDir((dir) => {
    const file = path.join(dir, 'node.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        ...MINIMAL_NODE_CONFIG_INPUT,
        ledger: { directory: 'data/ledger', read_only_directories: ['../archive', '/mnt/ro'] },
        snapshots: { read_only_directory: 'ro-snapshots' },
        output_files: { rpc_addresses_file: 'out/rpc_addresses.json' },
        command: { type: 'Join', service_certificate_file: 'certs/service.pem', join: { target_rpc_address: '127.0.0.1:8000' } },
      }),
    );
    const config = loadNodeConfig(file);
    assert.equal(config.ledger.directory, path.join(dir, 'data', 'ledger'));
    assert.deepEqual(config.ledger.read_only_directories, [path.join(path.dirname(dir), 'archive'), '/mnt/ro']);
    assert.equal(config.snapshots.read_only_directory, path.join(dir, 'ro-snapshots'));
    assert.equal(config.snapshots.directory, path.join(dir, 'snapshots'));
    assert.equal(config.command.service_certificate_file, path.join(dir, 'certs', 'service.pem'));
    assert.equal(config.node_certificate_file, path.join(dir, 'node_cert.pem'));
    assert.deepEqual(config.output_files, { rpc_addresses_file: path.join(dir, 'out', 'rpc_addresses.json') });
  });
});

test('node and service data files are read and parsed', () => {
  withTempDir((dir) => {
    fs.writeFileSync(path.join(dir, 'node_data.json'), JSON.stringify({ location: 'rack 4' }));
    fs.writeFileSync(path.join(dir, 'service_data.json'), '[1, 2]');
    const config = defaultNodeConfig({ node_data_json_file: 'node_data.json', service_data_json_file: 'service_data.json' }, dir);
    assert.deepEqual(config.node_data, { location: 'rack 4' });
    assert.deepEqual(config.service_data, [1, 2]);
    assert.equal(config.node_data_json_file, path.join(dir, 'node_data.json'));
  });
});

test('unknown keys are rejected at the top level and nested, with their path', () => {
  const lines = errorsOf({ bogus: 1, ledger: { chunksize: '1MB' }, rpc_interfaces: { primary: { bind: 'x' } } });
  assertOneLineMatches(lines, /^configuration error: unknown key "bogus"$/);
  assertOneLineMatches(lines, /unknown key "ledger\.chunksize"/);
  assertOneLineMatches(lines, /unknown key "rpc_interfaces\.primary\.bind"/);
  assert.equal(lines.length, 3, lines.join('\n'));
});

test('wrong types name the key and what was expected', () => {
  const lines = errorsOf({ worker_threads: 'two', ledger: { read_only_directories: 'ro' }, snapshots: { tx_count: 1.5 }, command: { join: { fetch_recent_snapshot: 'yes' } } });
  assertOneLineMatches(lines, /at "worker_threads": expected an integer, got "two"/);
  assertOneLineMatches(lines, /at "ledger\.read_only_directories": expected an array, got "ro"/);
  assertOneLineMatches(lines, /at "snapshots\.tx_count": expected an integer, got 1\.5/);
  assertOneLineMatches(lines, /at "command\.join\.fetch_recent_snapshot": expected a boolean, got "yes"/);
});

test('bad durations are reported with the accepted forms', () => {
  const lines = errorsOf({ consensus: { election_timeout: 'fast', message_timeout: 100 }, pending_node_timeout: '0.5ms', files_cleanup: { interval: '0s' } });
  assertOneLineMatches(lines, /^configuration error at "consensus\.election_timeout": "fast" is not a duration \(examples: "100ms", "2s", "30min", "1h"\)$/);
  assertOneLineMatches(lines, /at "consensus\.message_timeout": 100 is not a duration: give a unit/);
  assertOneLineMatches(lines, /at "pending_node_timeout": "0\.5ms" is too short: at least 1ms \("0s" disables it\)/);
  assertOneLineMatches(lines, /at "files_cleanup\.interval": "0s" is too short: at least 1ms/);
});

test('bad sizes are reported with the accepted forms', () => {
  const lines = errorsOf({ ledger: { chunk_size: '5XB' }, jwt: { key_refresh_max_response_size: -1 }, rpc_interfaces: { primary: { max_body_size: 0 } } });
  assertOneLineMatches(lines, /^configuration error at "ledger\.chunk_size": "5XB" is not a size \(examples: "5MB", "64KB", "1048576"\)$/);
  assertOneLineMatches(lines, /at "jwt\.key_refresh_max_response_size":/);
  assertOneLineMatches(lines, /at "rpc_interfaces\.primary\.max_body_size": 0 is too small/);
});

test('max_body_size is at most 32MB: a backup must forward any accepted request in one node-to-node message', () => {
  assertOneLineMatches(
    errorsOf({ rpc_interfaces: { primary: { max_body_size: '33MB' } } }),
    /at "rpc_interfaces\.primary\.max_body_size": "33MB" is too large: at most 32MB \(a backup forwards a request to the primary in one node-to-node message\)/,
  );
  assertOneLineMatches(errorsOf({ rpc_interfaces: { primary: { max_body_size: 32 * 1024 * 1024 + 1 } } }), /max_body_size": 33554433 is too large/);
  assert.equal(defaultNodeConfig({ rpc_interfaces: { primary: { bind_address: '127.0.0.1:0', max_body_size: '32MB' } } }).rpc_interfaces['primary']!.max_body_size, 32 * 1024 * 1024);
});

test('bad enum values list the accepted ones', () => {
  const lines = errorsOf({
    command: { type: 'Begin' },
    logging: { format: 'XML', level: 'warn' },
    node_certificate: { curve_id: 'Secp521R1' },
    rpc_interfaces: { primary: { enabled_operator_features: ['LedgerChunkWrite'] } },
  });
  assertOneLineMatches(lines, /"command\.type" must be one of Start, Join, Recover \(got "Begin"\)/);
  assertOneLineMatches(lines, /"logging\.format" must be one of Text, Json/);
  assertOneLineMatches(lines, /"logging\.level" must be one of trace, debug, info, fail, fatal/);
  assertOneLineMatches(lines, /"node_certificate\.curve_id" must be one of Secp384R1, Secp256R1/);
  assertOneLineMatches(lines, /"rpc_interfaces\.primary\.enabled_operator_features\[0\]" must be one of LedgerChunkRead, SnapshotRead, SnapshotCreate/);
});

test('missing required keys and sections are named', () => {
  assert.throws(() => parseNodeConfig({}, os.tmpdir()), (e: unknown) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, /"command" is required/);
    assert.match(e.message, /"rpc_interfaces" is required/);
    return true;
  });
  assertOneLineMatches(errorsOf({ command: { type: 'Join' } }), /"command\.join" is required when "command\.type" is Join/);
  assertOneLineMatches(errorsOf({ command: { type: 'Join', join: {} } }), /"command\.join\.target_rpc_address" is required/);
  assertOneLineMatches(errorsOf({ command: { start: { members: [] } } }), /at "command\.start\.members": a new service needs at least one member/);
  assertOneLineMatches(errorsOf({ command: { start: { members: [{}] } } }), /"command\.start\.members\[0\]\.certificate_file" is required/);
  assertOneLineMatches(errorsOf({ rpc_interfaces: [] }), /at "rpc_interfaces": at least one RPC interface is needed/);
  assert.throws(() => parseNodeConfig({ command: { type: 'Start' }, rpc_interfaces: { a: { bind_address: '127.0.0.1:0' } } }, os.tmpdir()), /"command\.start" is required when "command\.type" is Start/);
  assertOneLineMatches(errorsOf({ sealing_recovery: {} }), /"sealing_recovery\.location" is required/);
});

test('the whole file must be a JSON object', () => {
  assert.throws(() => parseNodeConfig([1], os.tmpdir()), /configuration error: expected an object, got an array/);
});

test('bad addresses are refused', () => {
  const cases: [unknown, RegExp][] = [
    ['localhost', /"localhost" is not an address \(expected "host:port"/],
    ['127.0.0.1:65536', /port "65536" is not an integer from 0 to 65535/],
    ['127.0.0.1:-1', /port "-1"/],
    ['::1:8000', /put an IPv6 host in brackets/],
    ['[zz::1]:80', /"zz::1" is not an IPv6 address/],
    ['bad_host!:80', /"bad_host!" is not a host name or IP address/],
    ['300.1.1.1:80', /"300\.1\.1\.1" is not a host name or IP address/],
  ];
  for (const [address, pattern] of cases) {
    assertOneLineMatches(errorsOf({ rpc_interfaces: { primary: { bind_address: address } } }), pattern);
  }
  assertOneLineMatches(errorsOf({ command: { type: 'Join', join: { target_rpc_address: 'node0' } } }), /at "command\.join\.target_rpc_address": "node0" is not an address/);
  assertOneLineMatches(errorsOf({ node_certificate: { subject_alt_names: ['dnsName:x'] } }), /"dnsName:x" is not a subject alternative name/);
  assertOneLineMatches(
    errorsOf({ rpc_interfaces: { a: { bind_address: '127.0.0.1:8000' }, b: { bind_address: '127.0.0.1:8000' } } }),
    /at "rpc_interfaces\.b\.bind_address": "127\.0\.0\.1:8000" is already the bind address of "rpc_interfaces\.a\.bind_address"/,
  );
  assertOneLineMatches(errorsOf({ rpc_interfaces: [{ bind_address: '127.0.0.1:1', name: 'x' }, { bind_address: '127.0.0.1:2', name: 'x' }] }), /at "rpc_interfaces\[1\]\.name": name "x" is used twice/);
});

test('parseHostPort splits hosts and ports, IPv6 in brackets', () => {
  assert.deepEqual(parseHostPort('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
  assert.deepEqual(parseHostPort('[::1]:8443'), { host: '::1', port: 8443 });
  assert.deepEqual(parseHostPort('[2001:db8::10.0.0.1]:1'), { host: '2001:db8::10.0.0.1', port: 1 });
  assert.deepEqual(parseHostPort('node-0.example.com:65535'), { host: 'node-0.example.com', port: 65535 });
  assert.equal(typeof parseHostPort('[1:2:3:4:5:6:7:8:9]:1'), 'string');
});

test('max_committed_ledger_chunks needs a read-only ledger directory', () => {
  assertOneLineMatches(
    errorsOf({ files_cleanup: { max_committed_ledger_chunks: 3 } }),
    /at "files_cleanup\.max_committed_ledger_chunks": needs at least one "ledger\.read_only_directories" entry/,
  );
  assertOneLineMatches(errorsOf({ files_cleanup: { max_committed_ledger_chunks: 3 }, ledger: { read_only_directories: [] } }), /read_only_directories/);
  const config = defaultNodeConfig({ files_cleanup: { max_committed_ledger_chunks: 3, max_snapshots: 2 }, ledger: { read_only_directories: ['ro'] } });
  assert.equal(config.files_cleanup.max_committed_ledger_chunks, 3);
  assert.equal(config.files_cleanup.max_snapshots, 2);
  assertOneLineMatches(errorsOf({ files_cleanup: { max_snapshots: 0 } }), /at "files_cleanup\.max_snapshots": must be at least 1 \(got 0\)/);
});

test('message_timeout must be shorter than election_timeout', () => {
  assertOneLineMatches(errorsOf({ consensus: { election_timeout: '100ms', message_timeout: '100ms' } }), /at "consensus\.message_timeout": must be shorter than "consensus\.election_timeout"/);
});

test('missing or invalid JSON data files are reported with the key', () => {
  withTempDir((dir) => {
    fs.writeFileSync(path.join(dir, 'broken.json'), '{ "a": ');
    const lines = errorsOf({ node_data_json_file: 'absent.json', service_data_json_file: 'broken.json' }, dir);
    assertOneLineMatches(lines, /^configuration error at "node_data_json_file": cannot read .*absent\.json/);
    assertOneLineMatches(lines, /^configuration error at "service_data_json_file": .*broken\.json is not valid JSON/);
  });
});

test('all problems are reported together, one per line', () => {
  withTempDir((dir) => {
    const lines = errorsOf({ bogus: true, ledger: { chunk_size: '5XB' }, logging: { level: 'loud' }, node_data_json_file: 'absent.json' }, dir);
    assert.equal(lines.length, 4, lines.join('\n'));
  });
});

test('the configuration file itself: unreadable, not JSON, or invalid', () => {
  withTempDir((dir) => {
    assert.throws(() => loadNodeConfig(path.join(dir, 'absent.json')), (e: unknown) => e instanceof ConfigError && /cannot read configuration file/.test(e.message));
    fs.writeFileSync(path.join(dir, 'node.json'), '{ nope');
    assert.throws(() => loadNodeConfig(path.join(dir, 'node.json')), /node\.json is not valid JSON/);
    fs.writeFileSync(path.join(dir, 'node.json'), JSON.stringify({ ...MINIMAL_NODE_CONFIG_INPUT, snapshots: { tx_count: 0 }, ledger: 3 }));
    assert.throws(() => loadNodeConfig(path.join(dir, 'node.json')), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      const lines = e.message.split('\n');
      assert.match(lines[0]!, /^invalid configuration file .*node\.json \(2 problems\):$/);
      assert.equal(e.issues.length, 2);
      assert.deepEqual(e.issues.map((i) => i.path).sort(), ['ledger', 'snapshots.tx_count']);
      return true;
    });
  });
});

test('loading a bad configuration writes nothing to its folder', () => {
  withTempDir((dir) => {
    const file = path.join(dir, 'node.json');
    fs.writeFileSync(file, JSON.stringify({ ...MINIMAL_NODE_CONFIG_INPUT, ledger: { chunk_size: '5XB' }, node_data_json_file: 'absent.json' }));
    const before = fs.readdirSync(dir, { recursive: true }).sort();
    assert.throws(() => loadNodeConfig(file), ConfigError);
    assert.deepEqual(fs.readdirSync(dir, { recursive: true }).sort(), before);
    // A good configuration does not create its ledger or snapshot folders either: the node does.
    fs.writeFileSync(file, JSON.stringify(MINIMAL_NODE_CONFIG_INPUT));
    loadNodeConfig(file);
    assert.deepEqual(fs.readdirSync(dir, { recursive: true }).sort(), before);
  });
});

test('the JSON Schema describes the file, with defaults and no unknown keys', () => {
  const schema = nodeConfigJsonSchema() as { properties: Record<string, any>; required: string[]; additionalProperties: boolean };
  assert.equal(schema.additionalProperties, false);
  assert.deepEqual(schema.required.sort(), ['command', 'rpc_interfaces']);
  assert.equal(schema.properties['ledger'].properties.chunk_size.default, '5MB');
  assert.equal(schema.properties['ledger'].additionalProperties, false);
  assert.equal(schema.properties['pending_node_timeout'].default, '1h');
  assert.deepEqual(schema.properties['command'].properties.type.enum, ['Start', 'Join', 'Recover']);
});

test('service_certificate_file at the top level (the spec’s spelling) is command.service_certificate_file; both at once is an error', () => {
  const config = defaultNodeConfig({ service_certificate_file: 'certs/service.pem' }, '/srv/node0');
  assert.equal(config.command.service_certificate_file, path.resolve('/srv/node0', 'certs/service.pem'));
  assert.equal('service_certificate_file' in config, false, 'one place in the parsed configuration');
  assertOneLineMatches(
    errorsOf({ service_certificate_file: 'a.pem', command: { service_certificate_file: 'b.pem' } }),
    /"service_certificate_file" and "command.service_certificate_file" name the same file/,
  );
});
