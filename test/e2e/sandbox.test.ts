/**
 * End to end: `covenant sandbox` as a newcomer runs it. It starts its nodes as separate
 * processes, opens the service, writes network.json only once ready, serves the application to
 * its user, and stops every node on SIGINT.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { HttpsClient } from '../../src/platform/https-client.js';
import { CLI_ENTRY, waitForExit } from '../../src/testing/node-process.js';
import { until } from '../../src/testing/network.js';
import { getJson, type NetworkJson } from '../../src/cli/sandbox.js';

/** A command line run by a shell in `cwd` (exec: the pid is the command's). */
function spawnShell(commandLine: string, cwd: string): { process: ChildProcess; output: () => string } {
  const child = spawn('/bin/sh', ['-c', `exec ${commandLine}`], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  return { process: child, output: () => output };
}

/** Runs the covenant CLI to its end in `cwd`. */
async function runCli(args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [CLI_ENTRY, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  return { code: await waitForExit(child), output };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('covenant sandbox starts an open two-node network, describes it, and stops it on SIGINT', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-sandbox-'));
  const fragment = join(dir, 'fragment.json');
  writeFileSync(fragment, JSON.stringify({ ledger_signatures: { delay: '20ms' } }));
  const child = spawn(process.execPath, [CLI_ENTRY, 'sandbox', '--nodes', '2', '--dir', join(dir, 'sb'), '--node-config', fragment], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  let network: NetworkJson | undefined;
  try {
    const networkFile = join(dir, 'sb', 'network.json');
    await until('network.json', async () => (existsSync(networkFile) ? true : undefined), 60_000, 100);
    network = JSON.parse(readFileSync(networkFile, 'utf8')) as NetworkJson;
    assert.equal(network.nodes.length, 2);
    assert.ok(isAbsolute(network.service_certificate));
    for (const node of network.nodes) {
      assert.match(node.node_id, /^[0-9a-f]{64}$/);
      assert.match(node.rpc_address, /^127\.0\.0\.1:\d+$/);
      assert.ok(processAlive(node.pid));
      for (const path of [node.node_certificate, node.config]) assert.ok(existsSync(path), path);
      // The fragment was deep-merged into every node's configuration.
      assert.equal(JSON.parse(readFileSync(node.config, 'utf8')).ledger_signatures.delay, '20ms');
      // Absolute paths of node and of the CLI entry point: it works from any folder.
      assert.equal(node.restart_command, `${process.execPath} ${CLI_ENTRY} node --config ${node.config}`);
    }
    assert.ok(network.sandbox_pid === child.pid, 'network.json records the sandbox process');
    assert.equal(network.members.length, 1);
    assert.equal(network.users.length, 1);
    for (const path of [network.members[0]!.cert, network.members[0]!.private_key, network.members[0]!.encryption_private_key, network.users[0]!.private_key]) {
      assert.ok(existsSync(path), path);
    }
    for (const key of [network.members[0]!.private_key, network.members[0]!.encryption_private_key, network.users[0]!.private_key]) {
      assert.equal(statSync(key).mode & 0o777, 0o600, `${key} is readable by its owner only`);
    }
    // network.json is written just before the instructions are printed.
    await until('the printed instructions', async () => (output.includes('Press Ctrl-C') ? true : undefined), 10_000);
    assert.match(output, /curl --cacert/);

    const ca = readFileSync(network.service_certificate, 'utf8');
    const user = { certificatePem: readFileSync(network.users[0]!.cert, 'utf8'), privateKeyPem: readFileSync(network.users[0]!.private_key, 'utf8') };
    const clients = network.nodes.map((n) => new HttpsClient(n.rpc_address, ca));
    try {
      const service = await clients[1]!.request('GET', '/node/network');
      assert.equal(service.body.service_status, 'Open', 'the sandbox opened the service');
      // A sandbox's certificates outlive any working week (a service's default is one day).
      const yearMs = 365 * 86_400_000;
      assert.equal(Date.parse(service.body.service_certificate_valid_to) - Date.parse(service.body.service_certificate_valid_from), yearMs);
      const listed = (await clients[1]!.request('GET', '/node/network/nodes')).body.nodes as { certificate_valid_from: string; certificate_valid_to: string }[];
      assert.equal(listed.length, 2);
      for (const n of listed) assert.equal(Date.parse(n.certificate_valid_to) - Date.parse(n.certificate_valid_from), yearMs, JSON.stringify(n));
      assert.match(output, /Certificates are valid for 365 days; members renew them by proposal/);
      const write = await clients[1]!.request('POST', '/app/log/private', { body: { id: 5, msg: 'from the sandbox user' }, identity: user });
      assert.equal(write.status, 200);
      const txId = write.headers['x-covenant-transaction-id'];
      await until('commit', async () => {
        const status = await clients[0]!.request('GET', `/app/tx?transaction_id=${txId}`);
        return status.body.status === 'Committed' ? true : undefined;
      });
      assert.equal((await clients[0]!.request('GET', '/app/log/private?id=5', { identity: user })).body.msg, 'from the sandbox user');
    } finally {
      for (const c of clients) c.close();
    }

    // A node killed and run again as network.json says resumes as itself, with what it had.
    const second = network.nodes[1]!;
    process.kill(second.pid, 'SIGKILL');
    await until('node 1 to die', async () => (processAlive(second.pid) ? undefined : true), 10_000);
    // restart_command, run by a shell in another folder, exactly as network.json writes it.
    const restarted = spawnShell(second.restart_command, tmpdir());
    second.pid = restarted.process.pid!;
    const address = await until(
      'the restarted node',
      async () => {
        const file = join(second.config, '..', 'rpc_addresses.json');
        const rpc = Object.values(JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>)[0]!;
        const client = new HttpsClient(rpc, ca);
        try {
          const answer = await client.request('GET', '/app/log/private?id=5', { identity: user, timeoutMs: 2000 });
          return answer.status === 200 && answer.body.msg === 'from the sandbox user' ? rpc : undefined;
        } finally {
          client.close();
        }
      },
      30_000,
      100,
    );
    assert.match(address, /^127\.0\.0\.1:\d+$/);
    // A node added to the running sandbox is trusted, recorded in network.json, and stopped with it.
    const add = await runCli(['sandbox', 'add-node', '--network', networkFile], tmpdir());
    assert.equal(add.code, 0, add.output);
    const grown = JSON.parse(readFileSync(networkFile, 'utf8')) as NetworkJson;
    assert.equal(grown.nodes.length, 3);
    const added = grown.nodes[2]!;
    assert.ok(processAlive(added.pid));
    assert.equal(((await getJson(added.rpc_address, '/node/state', ca)).body as { state: string }).state, 'PartOfNetwork');

    // The member CLI tries the nodes of network.json in turn: node 0 gone, it still answers.
    const first = network.nodes[0]!;
    process.kill(first.pid, 'SIGKILL');
    await until('node 0 to die', async () => (processAlive(first.pid) ? undefined : true), 10_000);
    const show = await runCli(['member', 'show', 'service', '--network', networkFile], tmpdir());
    assert.equal(show.code, 0, show.output);
    assert.equal(JSON.parse(show.output).status, 'Open');
    // --args @file.json and --args-file: a PEM needs no hand-escaping. A proposal needs a primary:
    // once the two nodes left have elected one (else a backup forwards to the dead one and answers
    // PrimaryChanged or ForwardingTimedOut, not knowing whether it ran).
    await until(
      'a primary among the nodes left',
      async () => {
        for (const rpc of [address, added.rpc_address]) {
          const consensus = await getJson(rpc, '/node/consensus', ca);
          if ((consensus.body as { role?: string }).role === 'Primary') return true;
        }
        return undefined;
      },
      30_000,
      100,
    );
    const argsFile = join(dir, 'args.json');
    writeFileSync(argsFile, JSON.stringify({ cert: readFileSync(network.users[0]!.cert, 'utf8') }));
    for (const argsFlags of [['--args', `@${argsFile}`], ['--args-file', argsFile]]) {
      const proposed = await runCli(['member', 'propose', '--network', networkFile, '--action', 'set_user', ...argsFlags], tmpdir());
      assert.equal(proposed.code, 0, proposed.output);
      assert.match(JSON.parse(proposed.output).proposal_id, /^[0-9a-f]{64}$/);
    }
    const unreadable = await runCli(['member', 'propose', '--network', networkFile, '--action', 'set_user', '--args', `@${join(dir, 'missing.json')}`], tmpdir());
    assert.equal(unreadable.code, 1);
    assert.match(unreadable.output, /--args @.*missing\.json: cannot read/);

    // Running the sandbox again on its folder is refused: nothing is wiped.
    const again = await runCli(['sandbox', '--nodes', '1', '--dir', join(dir, 'sb')], tmpdir());
    assert.equal(again.code, 1);
    assert.match(again.output, /still runs|already exists/);
    assert.ok(existsSync(network.members[0]!.private_key));

    child.kill('SIGINT');
    assert.equal(await waitForExit(child), 0);
    for (const node of [...network.nodes.filter((n) => n !== second), added]) await until(`node ${node.pid} to stop`, async () => (processAlive(node.pid) ? undefined : true), 10_000);
    // The sandbox stops the nodes it started and the ones added to it; the restarted one is the test's.
    restarted.process.kill('SIGTERM');
    assert.equal(await waitForExit(restarted.process), 0, restarted.output());
  } finally {
    if (child.exitCode === null) child.kill('SIGINT');
    await Promise.race([waitForExit(child), new Promise((r) => setTimeout(r, 15_000))]);
    if (child.exitCode === null) child.kill('SIGKILL');
    const networkFile = join(dir, 'sb', 'network.json');
    const recorded = existsSync(networkFile) ? (JSON.parse(readFileSync(networkFile, 'utf8')) as NetworkJson).nodes : [];
    for (const node of [...(network?.nodes ?? []), ...recorded]) if (processAlive(node.pid)) process.kill(node.pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('covenant sandbox refuses a bad --node-config before creating anything, and shows why a node did not start', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-sandbox-'));
  const run = async (fragment: unknown, sandboxDir: string): Promise<{ code: number | null; stderr: string }> => {
    const file = join(dir, 'fragment.json');
    writeFileSync(file, typeof fragment === 'string' ? fragment : JSON.stringify(fragment));
    const child = spawn(process.execPath, [CLI_ENTRY, 'sandbox', '--nodes', '1', '--dir', sandboxDir, '--node-config', file], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      return { code: await waitForExit(child), stderr };
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  };
  try {
    for (const [fragment, reason] of [
      ['[1, 2]', /--node-config .*fragment\.json: must be a JSON object/],
      ['{"ledger": ', /--node-config .*fragment\.json: not JSON/],
    ] as const) {
      const sandboxDir = join(dir, 'never');
      const { code, stderr } = await run(fragment, sandboxDir);
      assert.equal(code, 1, fragment);
      assert.match(stderr, reason);
      assert.equal(existsSync(sandboxDir), false, `${fragment}: nothing was created`);
    }
    // A fragment the node refuses: the sandbox ends and prints the node's own reason.
    const { code, stderr } = await run({ bogus_key: 1 }, join(dir, 'sb'));
    assert.equal(code, 1);
    assert.match(stderr, /node 0 exited with status 2; the end of .*out\.log:\n.*unknown key "bogus_key"/s);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Every node of an old sandbox dies at once (SIGKILL); the sandbox that started them ends too. */
/** A folder for a sandbox recovery test, with a fast node configuration; cleanup() kills what the test started in it (sandboxes, node PIDs) and removes it. */
function recoveryWorkspace(): { dir: string; fragment: string; oldDir: string; started: ReturnType<typeof spawn>[]; pids: number[]; cleanup(): Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-sandbox-'));
  const fragment = join(dir, 'fragment.json');
  writeFileSync(fragment, JSON.stringify({ ledger_signatures: { delay: '20ms' }, consensus: { election_timeout: '500ms', message_timeout: '50ms' } }));
  const ws = {
    dir,
    fragment,
    oldDir: join(dir, 'old'),
    started: [] as ReturnType<typeof spawn>[],
    pids: [] as number[],
    async cleanup(): Promise<void> {
      // SIGINT first: a sandbox stops the nodes it started (even before it is ready); SIGKILL would leave them running.
      for (const child of ws.started) if (child.exitCode === null) child.kill('SIGINT');
      await Promise.all(ws.started.map((child) => Promise.race([waitForExit(child), new Promise((r) => setTimeout(r, 15_000))])));
      for (const child of ws.started) if (child.exitCode === null) child.kill('SIGKILL');
      for (const pid of ws.pids) if (processAlive(pid)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return ws;
}

/** Stops a recovered sandbox as its user would (SIGINT): it exits 0, and so do its nodes. */
async function stopRecovered(sandbox: ReturnType<typeof spawn>, pids: readonly number[]): Promise<void> {
  sandbox.kill('SIGINT');
  assert.equal(await waitForExit(sandbox), 0);
  for (const pid of pids) await until(`node ${pid} to stop`, async () => (processAlive(pid) ? undefined : true), 10_000);
}

async function disaster(pids: readonly number[], sandbox: ReturnType<typeof spawn>): Promise<void> {
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  for (const pid of pids) await until(`node ${pid} to die`, async () => (processAlive(pid) ? undefined : true), 10_000);
  sandbox.kill('SIGINT');
  await waitForExit(sandbox);
}

/**
 * Takes a snapshot of a running sandbox (POST /node/snapshot:create) and waits until every node
 * holds it committed: the recovery then finds a snapshot of the old service in each node's copy.
 */
async function takeSnapshot(client: HttpsClient, network: NetworkJson): Promise<string> {
  const answer = await client.request('POST', '/node/snapshot:create');
  assert.equal(answer.status, 204, answer.text);
  const committed = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.committed')) : []);
  return until('a committed snapshot on every node', async () => {
    const names = network.nodes.map((n) => committed(n.snapshots_dir));
    return names.every((list) => list.length > 0) ? names[0]![0]! : undefined;
  }, 30_000);
}

/** The startup seqno every node of a recovered sandbox reports: above 0 when it started from a snapshot. */
async function startupSeqnos(after: NetworkJson, ca: string): Promise<number[]> {
  const seqnos: number[] = [];
  for (const node of after.nodes) {
    const c = new HttpsClient(node.rpc_address, ca);
    try {
      seqnos.push(Number((await c.request('GET', '/node/state')).body.startup_seqno));
    } finally {
      c.close();
    }
  }
  return seqnos;
}

/** `covenant sandbox --recover-from oldDir` (into `<oldDir>-recovered`, its default), once it printed its instructions. */
async function recoverSandbox(oldDir: string, recoveredDir: string, fragment: string): Promise<Awaited<ReturnType<typeof runSandboxUntil>>> {
  const recovered = await runSandboxUntil(['--recover-from', oldDir, '--node-config', fragment], join(recoveredDir, 'network.json'));
  await until('the printed instructions', async () => (recovered.output().includes('Press Ctrl-C') ? true : undefined), 10_000).catch((e: unknown) => {
    recovered.child.kill('SIGINT');
    throw e;
  });
  return recovered;
}

/** Runs `covenant sandbox` with `args`, collecting its output; resolves once `file` exists. */
async function runSandboxUntil(args: string[], file: string): Promise<{ child: ReturnType<typeof spawn>; output: () => string }> {
  const child = spawn(process.execPath, [CLI_ENTRY, 'sandbox', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  await until(file, async () => {
    if (child.exitCode !== null) throw new Error(`the sandbox exited with ${child.exitCode}:\n${output}`);
    return existsSync(file) ? true : undefined;
  }, 120_000, 100).catch(async (e: unknown) => {
    // SIGINT: the sandbox stops the nodes it started so far.
    child.kill('SIGINT');
    await Promise.race([waitForExit(child), new Promise((r) => setTimeout(r, 15_000))]);
    if (child.exitCode === null) child.kill('SIGKILL');
    throw new Error(`${String(e)}; the sandbox printed:\n${output}`);
  });
  return { child, output: () => output };
}

test('covenant sandbox --recover-from recovers a killed sandbox from its ledgers and a committed snapshot, printing each step of the procedure', async () => {
  const ws = recoveryWorkspace();
  const { dir, fragment, oldDir } = ws;
  try {
    const old = await runSandboxUntil(['--nodes', '2', '--dir', oldDir, '--node-config', fragment], join(oldDir, 'network.json'));
    ws.started.push(old.child);
    const network = JSON.parse(readFileSync(join(oldDir, 'network.json'), 'utf8')) as NetworkJson;
    ws.pids = network.nodes.map((n) => n.pid);
    const user = { certificatePem: readFileSync(network.users[0]!.cert, 'utf8'), privateKeyPem: readFileSync(network.users[0]!.private_key, 'utf8') };
    const client = new HttpsClient(network.nodes[0]!.rpc_address, readFileSync(network.service_certificate, 'utf8'));
    try {
      let txId = '';
      for (let id = 1; id <= 20; id++) {
        const write = await client.request('POST', '/app/log/private', { body: { id, msg: `record ${id}` }, identity: user });
        assert.equal(write.status, 200);
        txId = write.headers['x-covenant-transaction-id'] as string;
      }
      await until('commit', async () => ((await client.request('GET', `/app/tx?transaction_id=${txId}`)).body.status === 'Committed' ? true : undefined));
      await takeSnapshot(client, network);
      // While the old nodes run, a recovery is refused and creates nothing.
      const refused = spawn(process.execPath, [CLI_ENTRY, 'sandbox', '--recover-from', oldDir, '--dir', join(dir, 'early')], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      refused.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      assert.equal(await waitForExit(refused), 1);
      assert.match(stderr, /still runs; disaster recovery is for a network whose nodes are gone/);
      assert.equal(existsSync(join(dir, 'early')), false);
    } finally {
      client.close();
    }
    // The disaster: every node dies at once; the sandbox that started them ends too.
    await disaster(ws.pids, old.child);

    // Without --dir, the recovered sandbox goes to <old>-recovered.
    const recoveredDir = `${oldDir}-recovered`;
    const recovered = await recoverSandbox(oldDir, recoveredDir, fragment);
    ws.started.push(recovered.child);
    const out = recovered.output();
    for (const step of [/Step 1: a Recover node on a copy of each of the 2 old ledgers/, /node 0: read the old public ledger; its last_signed_seqno is now \d+/, /Step 2: keeping node \d/, /node 2 joined the recovering service/, /Step 3: members vote/, /member 0 voted accept: Accepted/, /Step 4: members submit their recovery shares/, /recovery_count 1/, /New service certificate: /]) {
      assert.match(out, step);
    }
    const after = JSON.parse(readFileSync(join(recoveredDir, 'network.json'), 'utf8')) as NetworkJson;
    ws.pids = after.nodes.map((n) => n.pid);
    assert.equal(after.nodes.length, 2);
    const newCa = readFileSync(after.service_certificate, 'utf8');
    assert.notEqual(newCa, readFileSync(network.service_certificate, 'utf8'), 'the recovered service has a new identity');
    const seqnos = await startupSeqnos(after, newCa);
    assert.ok(seqnos.every((s) => s > 0), `every node started from the old service's snapshot: startup seqnos ${seqnos.join(', ')}`);
    const clients = after.nodes.map((n) => new HttpsClient(n.rpc_address, newCa));
    try {
      for (const c of clients) {
        assert.equal((await c.request('GET', '/app/log/private?id=20', { identity: user })).body.msg, 'record 20', 'every node reads the old private records');
      }
      const service = await clients[0]!.request('GET', '/node/network');
      assert.equal(service.body.service_status, 'Open');
      assert.equal(service.body.recovery_count, 1);
      assert.equal((await clients[1]!.request('GET', '/node/service/previous_identity')).body.previous_service_identity, readFileSync(network.service_certificate, 'utf8'));
      const write = await clients[1]!.request('POST', '/app/log/private', { body: { id: 21, msg: 'after' }, identity: user });
      assert.equal(write.status, 200, 'the recovered service takes writes');
    } finally {
      for (const c of clients) c.close();
    }
    await stopRecovered(recovered.child, ws.pids);
  } finally {
    await ws.cleanup();
  }
});

test('covenant sandbox --sealing, then --recover-from: the nodes recover the service by themselves from a ledger with a snapshot, no member action', async () => {
  const ws = recoveryWorkspace();
  const { fragment, oldDir } = ws;
  try {
    const old = await runSandboxUntil(['--nodes', '2', '--sealing', '--dir', oldDir, '--node-config', fragment], join(oldDir, 'network.json'));
    ws.started.push(old.child);
    assert.match(old.output(), /Sealing-based recovery: every node a location of the recovery decision protocol \(location0 127\.0\.0\.1:\d+, location1/);
    const network = JSON.parse(readFileSync(join(oldDir, 'network.json'), 'utf8')) as NetworkJson;
    ws.pids = network.nodes.map((n) => n.pid);
    const user = { certificatePem: readFileSync(network.users[0]!.cert, 'utf8'), privateKeyPem: readFileSync(network.users[0]!.private_key, 'utf8') };
    const client = new HttpsClient(network.nodes[0]!.rpc_address, readFileSync(network.service_certificate, 'utf8'));
    try {
      const write = await client.request('POST', '/app/log/private', { body: { id: 1, msg: 'sealed' }, identity: user });
      const txId = write.headers['x-covenant-transaction-id'];
      await until('commit', async () => ((await client.request('GET', `/app/tx?transaction_id=${txId}`)).body.status === 'Committed' ? true : undefined));
      await takeSnapshot(client, network);
    } finally {
      client.close();
    }
    // Sealed shares cover both nodes before the disaster.
    const logOf = (i: number) => readFileSync(join(oldDir, `node${i}`, 'out.log'), 'utf8');
    await until('sealed shares for both nodes', async () => (/sealed shares issued to 2 node\(s\)/.test(logOf(0)) ? true : undefined), 30_000);
    await disaster(ws.pids, old.child);

    const recoveredDir = `${oldDir}-recovered`;
    const recovered = await recoverSandbox(oldDir, recoveredDir, fragment);
    ws.started.push(recovered.child);
    const out = recovered.output();
    for (const step of [/each on its old location and virtual CPU key/, /sealing: unsealed the recovery key/, /this location opens the service \(Election\)/, /opened the service: joining it/, /open_kind Election/]) assert.match(out, step);
    assert.doesNotMatch(out, /members vote|submit their recovery shares/, 'no member took part');
    const after = JSON.parse(readFileSync(join(recoveredDir, 'network.json'), 'utf8')) as NetworkJson;
    ws.pids = after.nodes.map((n) => n.pid);
    assert.ok(after.nodes.some((n) => n.restart_command.endsWith('node.joined.json')), 'the rejoined node restarts with its joiner configuration');
    const ca = readFileSync(after.service_certificate, 'utf8');
    const seqnos = await startupSeqnos(after, ca);
    assert.ok(seqnos.every((s) => s > 0), `every node started from the old service's snapshot: startup seqnos ${seqnos.join(', ')}`);
    for (const node of after.nodes) {
      const c = new HttpsClient(node.rpc_address, ca);
      try {
        assert.equal((await c.request('GET', '/app/log/private?id=1', { identity: user })).body.msg, 'sealed');
      } finally {
        c.close();
      }
    }
    await stopRecovered(recovered.child, ws.pids);
  } finally {
    await ws.cleanup();
  }
});
