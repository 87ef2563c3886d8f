/**
 * `covenant sandbox --recover-from <old sandbox dir>`: the spec's disaster recovery procedure in
 * one command, on a sandbox's network whose nodes are gone (docs/recovery.md, "The recovery
 * procedure"), each step printed as it happens:
 *
 * 1. copies every old node's ledger and snapshot folders (the old folder is never written) and
 *    starts one Recover node per old ledger; each reads the public domain of its copy and
 *    reports its last_signed_seqno;
 * 2. keeps the node with the highest last_signed_seqno, stops the others, and starts new nodes
 *    that join the kept one, up to the old network's size;
 * 3. the old members vote transition_service_to_open with the previous and the next service
 *    identity, then submit their recovery shares until the threshold is reached;
 * 4. once the service is open and every node reads its private ledger, writes DIR/network.json
 *    (the new service certificate, the same members and users) and stays in the foreground.
 */
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { errorMessage } from '../base/errors.js';
import { certificateId } from '../crypto/index.js';
import { ACCEPT_BALLOT, propose, submitRecoveryShare, vote, type GovAnswer, type MemberConnection } from './member.js';
import { writeFileAtomic } from './node-command.js';
import { printReady } from './sandbox.js';
import { getJson, nodeRestartCommand, prepareSandboxDir, processCommandLine, readConfigFragment, SANDBOX_CERTIFICATE_VALIDITY_DAYS, SandboxNodes, sleep, type NetworkJson, type NetworkNode } from './sandbox-nodes.js';

export interface SandboxRecoveryOptions {
  /** The old sandbox's folder (its network.json names the ledgers, members and users). */
  readonly from: string;
  readonly dir: string;
  readonly nodeConfigFile?: string;
  readonly readyTimeoutSeconds: number;
  /** Wipe `dir` if it already holds anything (refused otherwise). */
  readonly force?: boolean;
  readonly print: (line: string) => void;
}

/** Reads the old sandbox's network.json, refusing while any of its nodes still runs. */
function readOldNetwork(from: string): NetworkJson {
  const file = join(from, 'network.json');
  if (!existsSync(file)) throw new Error(`--recover-from ${from}: no network.json there (the folder of a sandbox that reached ready)`);
  const network = JSON.parse(readFileSync(file, 'utf8')) as NetworkJson;
  for (const node of network.nodes) {
    if (processCommandLine(node.pid)?.includes(node.config)) {
      throw new Error(`--recover-from ${from}: node ${node.node_id.slice(0, 12)}… (pid ${node.pid}) still runs; disaster recovery is for a network whose nodes are gone: stop it first`);
    }
  }
  if (!network.members.some((m) => m.encryption_private_key)) throw new Error(`--recover-from ${from}: network.json names no member encryption key, so no recovery share can be decrypted`);
  return network;
}

/** Copies the old members' and users' files into `common`, keeping their names. */
function copyIdentities(old: NetworkJson, common: string): Pick<NetworkJson, 'members' | 'users'> {
  const copy = (file: string) => {
    const to = join(common, basename(file));
    copyFileSync(file, to);
    return to;
  };
  return {
    members: old.members.map((m) => ({ id: m.id, cert: copy(m.cert), private_key: copy(m.private_key), encryption_private_key: m.encryption_private_key ? copy(m.encryption_private_key) : '' })),
    users: old.users.map((u) => ({ id: u.id, cert: copy(u.cert), private_key: copy(u.private_key) })),
  };
}

function connectionOf(member: NetworkJson['members'][number], address: string, caPem: string): MemberConnection {
  const certificatePem = readFileSync(member.cert, 'utf8');
  return { address, caPem, certificatePem, privateKeyPem: readFileSync(member.private_key, 'utf8'), memberId: certificateId(certificatePem) };
}

export async function runSandboxRecovery(options: SandboxRecoveryOptions): Promise<void> {
  const from = resolve(options.from);
  const dir = resolve(options.dir);
  if (dir === from) throw new Error(`--dir must differ from --recover-from (${from} is kept as it is)`);
  const fragment = options.nodeConfigFile ? readConfigFragment(options.nodeConfigFile) : {};
  const old = readOldNetwork(from);
  const { print } = options;
  prepareSandboxDir(dir, options.force === true);
  const common = join(dir, 'common');
  mkdirSync(common, { recursive: true });
  const identities = copyIdentities(old, common);
  const previousCert = join(common, 'previous_service_cert.pem');
  copyFileSync(old.service_certificate, previousCert);
  const nodes = new SandboxNodes(dir, fragment, options.readyTimeoutSeconds, print);
  const sealing = old.nodes.map((n) => sealingOf(n.config));
  if (sealing.every((s) => s?.recovery_decision_protocol !== undefined)) {
    await recoverBySealing({ old, from, dir, common, identities, previousCert, nodes, sealing: sealing as SealingSection[], print });
    return;
  }

  print(`Step 1: a Recover node on a copy of each of the ${old.nodes.length} old ledgers (${from} is not written)`);
  for (const [i, oldNode] of old.nodes.entries()) spawnRecoverNode(nodes, i, oldNode, previousCert);
  const read: { index: number; lastSignedSeqno: number }[] = [];
  for (const i of old.nodes.keys()) {
    try {
      const state = await nodes.waitState(i, ['PartOfPublicNetwork'], join(nodes.nodeDir(i), 'service_cert.pem'));
      print(`  node ${i}: read the old public ledger; its last_signed_seqno is now ${state.last_signed_seqno} (the old ledger's last signature, then the recovery's own first transactions)`);
      read.push({ index: i, lastSignedSeqno: state.last_signed_seqno ?? 0 });
    } catch (e) {
      print(`  node ${i}: did not recover (${errorMessage(e).split('\n')[0]})`);
    }
  }
  if (read.length === 0) throw new Error('no old ledger could be recovered; see the nodes\' logs');
  const kept = read.reduce((best, r) => (r.lastSignedSeqno > best.lastSignedSeqno ? r : best));

  print(`Step 2: keeping node ${kept.index} (the highest last_signed_seqno, ${kept.lastSignedSeqno}); stopping the others`);
  for (const r of read) if (r !== kept) await nodes.stop(r.index);
  const serviceCert = join(common, 'service_cert.pem');
  copyFileSync(join(nodes.nodeDir(kept.index), 'service_cert.pem'), serviceCert);
  const primary = nodes.entries[kept.index]!;
  const joiners: number[] = [];
  for (let k = 1; k < old.nodes.length; k++) {
    const i = old.nodes.length + k - 1;
    nodes.spawn(i, { type: 'Join', service_certificate_file: serviceCert, join: { target_rpc_address: primary.rpc_address, retry_timeout: '200ms' } });
    joiners.push(i);
  }
  for (const i of joiners) {
    await nodes.waitState(i, ['PartOfPublicNetwork'], serviceCert);
    print(`  node ${i} joined the recovering service`);
  }

  const caPem = readFileSync(serviceCert, 'utf8');
  print('Step 3: members vote transition_service_to_open with the previous and the next service identity');
  await voteToOpen(identities.members.map((m) => connectionOf(m, primary.rpc_address, caPem)), readFileSync(previousCert, 'utf8'), caPem, print);
  print('Step 4: members submit their recovery shares');
  await submitShares(identities.members, primary.rpc_address, caPem, print);

  for (const i of [kept.index, ...joiners]) await nodes.waitState(i, ['PartOfNetwork'], serviceCert);
  const service = (await getJson(primary.rpc_address, '/node/network', caPem)).body as { service_status: string; recovery_count: number };
  print(`The service is ${service.service_status} again (recovery_count ${service.recovery_count}); every node read its private ledger`);
  print(`New service certificate: ${serviceCert} (distribute it to users: the service identity changed)`);
  const network: NetworkJson = { service_certificate: serviceCert, sandbox_pid: process.pid, nodes: [kept.index, ...joiners].map((i) => nodes.entries[i]!), ...identities };
  writeFileAtomic(join(dir, 'network.json'), JSON.stringify(network, null, 2) + '\n');
  printReady(network, join(dir, 'network.json'), print);
  await nodes.foreground(join(dir, 'network.json'));
}

/** Member 0 proposes; members vote in order until the proposal is accepted. */
async function voteToOpen(members: MemberConnection[], previousPem: string, nextPem: string, print: (line: string) => void): Promise<void> {
  const action = { name: 'transition_service_to_open', args: { previous_service_identity: previousPem, next_service_identity: nextPem } };
  const proposal = await propose(members[0]!, [action]);
  const id = (proposal.body as { proposal_id: string }).proposal_id;
  let state = (proposal.body as { state: string }).state;
  print(`  member 0 proposed ${id}: ${state}`);
  for (const [k, member] of members.entries()) {
    if (state !== 'Open') break;
    const ballot: GovAnswer = await vote(member, id, ACCEPT_BALLOT);
    state = (ballot.body as { state: string }).state;
    print(`  member ${k} voted accept: ${state}`);
  }
  if (state !== 'Accepted') throw new Error(`the proposal to open the recovered service is ${state}`);
}

/** Members with an encryption key submit their shares in order until the threshold is reached. */
async function submitShares(members: NetworkJson['members'], address: string, caPem: string, print: (line: string) => void): Promise<void> {
  for (const [k, member] of members.entries()) {
    if (!member.encryption_private_key) continue;
    const answer = await submitRecoveryShare(connectionOf(member, address, caPem), readFileSync(member.encryption_private_key, 'utf8'));
    const body = answer.body as { message: string; submitted_count: number; recovery_threshold: number };
    print(`  member ${k}: ${body.message}`);
    if (body.submitted_count >= body.recovery_threshold) return;
  }
  throw new Error('every member holding a share submitted it and the threshold is not reached: fewer members hold shares than the threshold');
}

/** A Recover node i on a copy of an old node's ledger and snapshots (each makes a service identity of its own). */
function spawnRecoverNode(nodes: SandboxNodes, i: number, oldNode: NetworkNode, previousCert: string, extra: Record<string, unknown> = {}): void {
  const nodeDir = nodes.nodeDir(i);
  rmSync(nodeDir, { recursive: true, force: true });
  if (existsSync(oldNode.ledger_dir)) cpSync(oldNode.ledger_dir, join(nodeDir, 'ledger'), { recursive: true });
  if (existsSync(oldNode.snapshots_dir)) cpSync(oldNode.snapshots_dir, join(nodeDir, 'snapshots'), { recursive: true });
  const command = {
    type: 'Recover',
    service_certificate_file: join(nodeDir, 'service_cert.pem'),
    recover: { initial_service_certificate_validity_days: SANDBOX_CERTIFICATE_VALIDITY_DAYS, previous_service_identity_file: previousCert },
  };
  nodes.spawn(i, command, extra, true);
}

interface SealingSection {
  location: { name: string; address: string };
  virtual_cpu_key_file?: string;
  recovery_decision_protocol?: unknown;
}

/** An old node's sealing_recovery section, with its virtual CPU key file as an absolute path. */
function sealingOf(configPath: string): SealingSection | undefined {
  const section = (JSON.parse(readFileSync(configPath, 'utf8')) as { sealing_recovery?: SealingSection }).sealing_recovery;
  if (section === undefined) return undefined;
  return { ...section, virtual_cpu_key_file: resolve(dirname(configPath), section.virtual_cpu_key_file ?? 'virtual_cpu_key') };
}

interface SealedRecoveryRun {
  readonly old: NetworkJson;
  readonly from: string;
  readonly dir: string;
  readonly common: string;
  readonly identities: Pick<NetworkJson, 'members' | 'users'>;
  readonly previousCert: string;
  readonly nodes: SandboxNodes;
  readonly sealing: SealingSection[];
  readonly print: (line: string) => void;
}

/**
 * A network started with --sealing: every old node is recovered in Recover mode on a copy of its
 * ledger, on its old location and virtual CPU key; the recovery decision protocol opens the
 * service with no member action (each phase printed from the nodes' logs as it happens), and the
 * locations it did not choose rejoin the one it did.
 */
async function recoverBySealing(run: SealedRecoveryRun): Promise<void> {
  const { old, nodes, print } = run;
  print(`Step 1: a Recover node on a copy of each of the ${old.nodes.length} old ledgers, each on its old location and virtual CPU key (${run.from} is not written)`);
  for (const [i, oldNode] of old.nodes.entries()) spawnRecoverNode(nodes, i, oldNode, run.previousCert, { sealing_recovery: run.sealing[i] });
  print('Step 2: the nodes unseal the ledger secrets and run the recovery decision protocol (no member action)');
  const logs = old.nodes.map((_, i) => ({ file: join(nodes.nodeDir(i), 'out.log'), printed: 0 }));
  const roles: ('opener' | 'joiner' | undefined)[] = old.nodes.map(() => undefined);
  for (let waited = 0; roles.some((r) => r === undefined); waited++) {
    if (waited > run.nodes.readyTimeoutMs / 200) throw new Error('the recovery decision protocol did not decide in time; see the nodes\' logs');
    for (const [i, log] of logs.entries()) {
      const lines = existsSync(log.file) ? readFileSync(log.file, 'utf8').split('\n') : [];
      for (const line of lines.slice(log.printed)) {
        const shown = /(recovery decision protocol: .*|sealing: .*|opened the recovered service at [^;]*)/.exec(line);
        if (shown) print(`  node ${i}: ${shown[1]}`);
      }
      log.printed = Math.max(lines.length - 1, log.printed);
      const nodeDir = nodes.nodeDir(i);
      roles[i] = existsSync(join(nodeDir, 'joined', 'service_cert.pem')) ? 'joiner' : existsSync(join(nodeDir, 'service_cert.pem')) ? 'opener' : undefined;
    }
    await sleep(200);
  }
  const opener = roles.indexOf('opener');
  if (opener === -1 || roles.filter((r) => r === 'opener').length > 1) throw new Error(`the recovery decision protocol opened ${roles.filter((r) => r === 'opener').length} services; see the nodes' logs`);
  const serviceCert = join(run.common, 'service_cert.pem');
  copyFileSync(join(nodes.nodeDir(opener), 'service_cert.pem'), serviceCert);
  print(`Step 3: node ${opener} opened the service; the others rejoin it`);
  for (const [i, role] of roles.entries()) {
    const nodeDir = nodes.nodeDir(i);
    if (role === 'joiner') {
      const entry = nodes.entries[i]!;
      entry.config = join(nodeDir, 'node.joined.json');
      entry.node_certificate = join(nodeDir, 'joined', 'node_cert.pem');
      entry.ledger_dir = join(nodeDir, 'joined', 'ledger');
      entry.snapshots_dir = join(nodeDir, 'joined', 'snapshots');
      entry.restart_command = nodeRestartCommand(entry.config);
    }
    await nodes.waitState(i, ['PartOfNetwork'], serviceCert);
  }
  const caPem = readFileSync(serviceCert, 'utf8');
  const service = (await getJson(nodes.entries[opener]!.rpc_address, '/node/network', caPem)).body as { service_status: string; recovery_count: number; recovery_decision?: { open_kind: string } };
  print(`The service is ${service.service_status} again (recovery_count ${service.recovery_count}, open_kind ${service.recovery_decision?.open_kind}); every node read its private ledger`);
  print(`New service certificate: ${serviceCert} (distribute it to users: the service identity changed)`);
  const order = [opener, ...roles.keys()].filter((i, k, all) => all.indexOf(i) === k);
  const network: NetworkJson = { service_certificate: serviceCert, sandbox_pid: process.pid, nodes: order.map((i) => nodes.entries[i]!), ...run.identities };
  writeFileAtomic(join(run.dir, 'network.json'), JSON.stringify(network, null, 2) + '\n');
  printReady(network, join(run.dir, 'network.json'), print);
  await nodes.foreground(join(run.dir, 'network.json'));
}
