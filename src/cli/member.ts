/**
 * `covenant member ...`: signs governance requests with a member's key files and sends them, so
 * nobody builds COSE_Sign1 envelopes by hand. The member, the node address and the service
 * certificate come from a sandbox's network.json (`--network`, `--member`) or from explicit
 * `--cert/--key/--address/--ca` flags (which override it).
 */
import { readFileSync } from 'node:fs';
import { type Command, InvalidArgumentError } from 'commander';
import { errorMessage } from '../base/errors.js';
import { certificateId } from '../crypto/index.js';
import { COSE_CONTENT_TYPE, signGovRequest, type GovMessageType } from '../gov/index.js';
import { HttpsClient } from '../platform/https-client.js';
import { decryptShare } from '../recovery/index.js';

export interface MemberConnection {
  /** host:port of a node's RPC interface. */
  readonly address: string;
  /** Service certificate: the only CA trusted for TLS. */
  readonly caPem: string;
  readonly certificatePem: string;
  readonly privateKeyPem: string;
  readonly memberId: string;
}

export interface GovAnswer {
  readonly status: number;
  readonly transactionId: string | undefined;
  readonly body: any;
}

export const ACCEPT_BALLOT = 'export function vote(proposal, proposerId) { return true }';
export const REJECT_BALLOT = 'export function vote(proposal, proposerId) { return false }';

const REQUEST_TIMEOUT_MS = 30_000;

export class GovRequestFailed extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${code} (${status}): ${message}`);
    this.name = 'GovRequestFailed';
  }
}

/** One HTTPS request to a node; JSON answer. Non-2xx answers become GovRequestFailed. */
export async function govRequest(connection: MemberConnection, method: string, path: string, body?: Uint8Array): Promise<GovAnswer> {
  const client = new HttpsClient(connection.address, connection.caPem);
  try {
    const answer = await client.request(method, path, {
      ...(body !== undefined ? { rawBody: Buffer.from(body), headers: { 'content-type': COSE_CONTENT_TYPE } } : {}),
      timeoutMs: REQUEST_TIMEOUT_MS,
    });
    const parsed = answer.body ?? (answer.text.length > 0 ? answer.text : undefined);
    if (answer.status < 200 || answer.status >= 300) {
      const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new GovRequestFailed(answer.status, error?.code ?? 'HttpError', error?.message ?? answer.text);
    }
    const txId = answer.headers['x-covenant-transaction-id'];
    return { status: answer.status, transactionId: typeof txId === 'string' ? txId : undefined, body: parsed };
  } finally {
    client.close();
  }
}

/** Signs `payload` as a governance message of `type` and POSTs it. */
export function signedPost(connection: MemberConnection, path: string, type: GovMessageType, payload: unknown, proposalId?: string): Promise<GovAnswer> {
  const body = signGovRequest({
    type,
    payload: payload === undefined ? '' : JSON.stringify(payload),
    privateKeyPem: connection.privateKeyPem,
    memberId: connection.memberId,
    createdAtSeconds: Math.floor(Date.now() / 1000),
    ...(proposalId !== undefined ? { proposalId } : {}),
  });
  return govRequest(connection, 'POST', path, body);
}

export function propose(connection: MemberConnection, actions: unknown[]): Promise<GovAnswer> {
  return signedPost(connection, '/gov/members/proposals:create', 'proposal', { actions });
}

export function vote(connection: MemberConnection, proposalId: string, ballot: string): Promise<GovAnswer> {
  return signedPost(connection, `/gov/members/proposals/${proposalId}/ballots/${connection.memberId}:submit`, 'ballot', { ballot }, proposalId);
}

export function withdraw(connection: MemberConnection, proposalId: string): Promise<GovAnswer> {
  return signedPost(connection, `/gov/members/proposals/${proposalId}:withdraw`, 'withdrawal', undefined, proposalId);
}

/**
 * A recovery member's part of a disaster recovery: fetches its encrypted share
 * (GET /gov/recovery/encrypted-shares/{member_id}), decrypts it with its encryption private key,
 * and submits it (POST /gov/recovery/members/{member_id}:recover, signed). The answer says how
 * many shares are submitted and how many the threshold needs.
 */
export async function submitRecoveryShare(connection: MemberConnection, encryptionPrivateKeyPem: string): Promise<GovAnswer> {
  const fetched = await govRequest(connection, 'GET', `/gov/recovery/encrypted-shares/${connection.memberId}`);
  const encrypted = (fetched.body as { encrypted_share?: unknown }).encrypted_share;
  if (typeof encrypted !== 'string') throw new Error('the node answered no encrypted_share');
  const share = decryptShare(new Uint8Array(Buffer.from(encrypted, 'base64')), encryptionPrivateKeyPem);
  return signedPost(connection, `/gov/recovery/members/${connection.memberId}:recover`, 'recovery_share', { share: Buffer.from(share).toString('base64') });
}

/** Fetches the state digest (`:update`) and acknowledges it (`:ack`): the member becomes Active. */
export async function ack(connection: MemberConnection): Promise<GovAnswer> {
  const update = await signedPost(connection, `/gov/members/state-digests/${connection.memberId}:update`, 'state_digest', undefined);
  const digest = (update.body as { state_digest: string }).state_digest;
  return signedPost(connection, `/gov/members/state-digests/${connection.memberId}:ack`, 'ack', { state_digest: digest });
}

/**
 * Opens the service with one member: acknowledge (if not Active yet), propose
 * transition_service_to_open, vote for it. Resolves once the service reports Open.
 *
 * A proposal that fails (or is refused, the constitution not even loaded) only because member
 * JavaScript ran out of its time budget (the node was too busy to run it in time: the default
 * constitution's work is tiny) is proposed again, at most
 * OPEN_ATTEMPTS_MAX times in all, each retry reported to `onRetry`; any other failure is thrown.
 */
export async function openService(
  connection: MemberConnection,
  onRetry: (reason: string) => void = () => undefined,
): Promise<{ proposalId: string; transactionId: string | undefined }> {
  const me = await govRequest(connection, 'GET', `/gov/members/${connection.memberId}`);
  if ((me.body as { status: string }).status !== 'Active') await ack(connection);
  for (let attempt = 1; ; attempt++) {
    let proposal;
    try {
      proposal = await propose(connection, [{ name: 'transition_service_to_open', args: {} }]);
    } catch (e) {
      // Loading the constitution or its validate ran out of the budget: the same busy node, refused before a proposal exists.
      if (e instanceof GovRequestFailed && REFUSED_TIMED_OUT.test(e.message) && attempt < OPEN_ATTEMPTS_MAX) {
        onRetry(`the proposal to open the service was refused (${e.message}); proposing again`);
        continue;
      }
      throw e;
    }
    const proposalId = (proposal.body as { proposal_id: string }).proposal_id;
    let state = (proposal.body as { state: string }).state;
    let transactionId = proposal.transactionId;
    if (state === 'Open') {
      const ballot = await vote(connection, proposalId, ACCEPT_BALLOT);
      state = (ballot.body as { state: string }).state;
      transactionId = ballot.transactionId;
    }
    if (state !== 'Accepted') {
      const info = (await govRequest(connection, 'GET', `/gov/members/proposals/${proposalId}`)).body as { failure?: { reason: string } };
      const reason = info.failure?.reason;
      if (state === 'Failed' && reason !== undefined && TIMED_OUT.test(reason) && attempt < OPEN_ATTEMPTS_MAX) {
        onRetry(`the proposal to open the service failed (${reason}); proposing again`);
        continue;
      }
      throw new Error(`the proposal to open the service is ${state}${reason !== undefined ? `: ${reason}` : ''} (more members may need to vote)`);
    }
    const service = await govRequest(connection, 'GET', '/gov/service/info');
    if ((service.body as { status: string }).status !== 'Open') throw new Error(`the service is ${(service.body as { status: string }).status} after the proposal was accepted`);
    return { proposalId, transactionId };
  }
}

/** How many proposals openService makes when member JavaScript runs out of time. */
export const OPEN_ATTEMPTS_MAX = 3;

/** A proposal's failure reason when member JavaScript ran out of its time budget (src/gov/governance.ts). */
const TIMED_OUT = /^(resolve|apply|ballot of member [0-9a-f]+) failed: Timeout: /;
/** A refusal when loading the constitution (500 ConstitutionFailure) or its validate (400) ran out of the budget (src/gov/governance.ts). */
const REFUSED_TIMED_OUT = /the constitution (could not be loaded|'s validate failed): Timeout: /;

// ------------------------------------------------------------------ command line

/** The part of the sandbox's network.json (see NetworkJson in sandbox.ts) that member commands read. */
interface NetworkFile {
  service_certificate: string;
  nodes: { rpc_address: string }[];
  members: { cert: string; private_key: string; encryption_private_key?: string }[];
}

interface ConnectionFlags {
  network?: string;
  member: number;
  cert?: string;
  key?: string;
  address?: string;
  ca?: string;
}

/** Builds the connection from network.json and/or explicit files. */
export function resolveConnection(flags: ConnectionFlags): MemberConnection {
  let network: NetworkFile | undefined;
  if (flags.network !== undefined) network = JSON.parse(readFileSync(flags.network, 'utf8')) as NetworkFile;
  const member = network?.members[flags.member];
  if (network && !member && (flags.cert === undefined || flags.key === undefined)) {
    throw new Error(`${flags.network} has no member ${flags.member} (it lists ${network.members.length})`);
  }
  const certFile = flags.cert ?? member?.cert;
  const keyFile = flags.key ?? member?.private_key;
  const caFile = flags.ca ?? network?.service_certificate;
  const address = flags.address ?? network?.nodes.find((n) => n.rpc_address)?.rpc_address;
  const missing = [
    certFile === undefined ? '--cert' : undefined,
    keyFile === undefined ? '--key' : undefined,
    caFile === undefined ? '--ca' : undefined,
    address === undefined ? '--address' : undefined,
  ].filter((x) => x !== undefined);
  if (missing.length > 0) throw new Error(`give --network <network.json> or ${missing.join(', ')}`);
  const certificatePem = readFileSync(certFile!, 'utf8');
  return { address: address!, caPem: readFileSync(caFile!, 'utf8'), certificatePem, privateKeyPem: readFileSync(keyFile!, 'utf8'), memberId: certificateId(certificatePem) };
}

/** The member's encryption private key file named in network.json. */
function encryptionKeyOf(flags: { network?: string; member?: number }): string {
  if (flags.network === undefined) throw new Error('give --encryption-key <file> (or --network <network.json>)');
  const network = JSON.parse(readFileSync(flags.network, 'utf8')) as NetworkFile;
  const file = network.members[flags.member ?? 0]?.encryption_private_key;
  if (file === undefined) throw new Error(`${flags.network} names no encryption key for member ${flags.member ?? 0}: give --encryption-key <file>`);
  return file;
}

function memberIndex(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('must be a member index (0, 1, ...)');
  return n;
}

function withConnectionFlags(command: Command): Command {
  return command
    .option('--network <file>', 'network.json written by `covenant sandbox`')
    .option('--member <index>', 'which member of network.json signs', memberIndex, 0)
    .option('--cert <file>', "member's certificate (PEM)")
    .option('--key <file>', "member's private key (PEM)")
    .option('--address <host:port>', "a node's RPC address")
    .option('--ca <file>', 'service certificate (TLS certificate authority)');
}

function print(answer: GovAnswer): void {
  const out = answer.transactionId === undefined ? answer.body : { ...(answer.body as object), transaction_id: answer.transactionId };
  process.stdout.write(JSON.stringify(out, null, 2) + '\n');
}

async function run(what: string, fn: () => Promise<GovAnswer | void>): Promise<void> {
  try {
    const answer = await fn();
    if (answer) print(answer);
  } catch (e) {
    process.stderr.write(`covenant member ${what}: ${errorMessage(e)}\n`);
    process.exitCode = 1;
  }
}

function readActions(opts: { actions?: string; action?: string; args?: string }): unknown[] {
  if ((opts.actions === undefined) === (opts.action === undefined)) throw new Error('give either --actions <file> or --action <name> [--args <json>]');
  if (opts.actions !== undefined) {
    const parsed = JSON.parse(readFileSync(opts.actions, 'utf8')) as unknown;
    if (Array.isArray(parsed)) return parsed;
    const actions = (parsed as { actions?: unknown } | null)?.actions;
    if (!Array.isArray(actions)) throw new Error(`${opts.actions} must hold an array of actions or {"actions": [...]}`);
    return actions;
  }
  let args: unknown = {};
  if (opts.args !== undefined) {
    try {
      args = JSON.parse(opts.args) as unknown;
    } catch (e) {
      throw new Error(`--args is not JSON: ${errorMessage(e)}`);
    }
  }
  return [{ name: opts.action, args }];
}

function readBallot(ballot: string): string {
  if (ballot === 'accept') return ACCEPT_BALLOT;
  if (ballot === 'reject') return REJECT_BALLOT;
  return readFileSync(ballot, 'utf8');
}

type Flags = ConnectionFlags & Record<string, any>;

export function registerMemberCommands(program: Command): void {
  const member = program.command('member').description('sign and send governance requests as a consortium member');

  withConnectionFlags(member.command('propose'))
    .description('create a proposal')
    .option('--actions <file>', 'JSON file: [{"name", "args"}, ...] or {"actions": [...]}')
    .option('--action <name>', 'a single action')
    .option('--args <json>', 'arguments of --action (JSON)')
    .action((opts: Flags) => run('propose', () => propose(resolveConnection(opts), readActions(opts as { actions?: string; action?: string; args?: string }))));

  withConnectionFlags(member.command('vote'))
    .description('submit a ballot on a proposal')
    .requiredOption('--proposal <id>', 'proposal id')
    .requiredOption('--ballot <accept|reject|file>', 'accept, reject, or a JavaScript file exporting vote(proposal, proposerId)')
    .action((opts: Flags) => run('vote', () => vote(resolveConnection(opts), opts.proposal as string, readBallot(opts.ballot as string))));

  withConnectionFlags(member.command('withdraw'))
    .description('withdraw one of your open proposals')
    .requiredOption('--proposal <id>', 'proposal id')
    .action((opts: Flags) => run('withdraw', () => withdraw(resolveConnection(opts), opts.proposal as string)));

  withConnectionFlags(member.command('ack'))
    .description('acknowledge the state digest (an Accepted member becomes Active)')
    .action((opts: Flags) => run('ack', () => ack(resolveConnection(opts))));

  withConnectionFlags(member.command('recovery-share'))
    .description("fetch this member's encrypted recovery share, decrypt it and submit it (disaster recovery)")
    .option('--encryption-key <file>', "member's encryption private key (PEM; default: network.json's)")
    .action((opts: Flags) =>
      run('recovery-share', async () => {
        const keyFile = (opts.encryptionKey as string | undefined) ?? encryptionKeyOf(opts);
        const answer = await submitRecoveryShare(resolveConnection(opts), readFileSync(keyFile, 'utf8'));
        process.stdout.write(`${(answer.body as { message: string }).message}\n`);
      }),
    );

  withConnectionFlags(member.command('open-service'))
    .description('acknowledge if needed, propose transition_service_to_open and vote for it')
    .action((opts: Flags) =>
      run('open-service', async () => {
        const { proposalId } = await openService(resolveConnection(opts), (note) => process.stderr.write(`${note}\n`));
        process.stdout.write(`service is Open (proposal ${proposalId})\n`);
      }),
    );

  const shows: Record<string, (id?: string) => string> = {
    proposals: (id) => (id ? `/gov/members/proposals/${id}` : '/gov/members/proposals'),
    actions: (id) => `/gov/members/proposals/${required(id, 'actions <proposal id>')}/actions`,
    members: (id) => (id ? `/gov/members/${id}` : '/gov/members'),
    service: () => '/gov/service/info',
    constitution: () => '/gov/service/constitution',
    nodes: (id) => (id ? `/gov/service/nodes/${id}` : '/gov/service/nodes'),
    'join-policy': () => '/gov/service/join-policy',
  };
  withConnectionFlags(member.command('show'))
    .description(`show governance state: ${Object.keys(shows).join(', ')} [id]`)
    .argument('<what>', Object.keys(shows).join(' | '))
    .argument('[id]', 'a proposal, member or node id')
    .action((what: string, id: string | undefined, opts: Flags) =>
      run('show', async () => {
        const path = shows[what];
        if (!path) throw new Error(`cannot show "${what}"; choose one of ${Object.keys(shows).join(', ')}`);
        return govRequest(resolveConnection(opts), 'GET', path(id));
      }),
    );
}

function required(id: string | undefined, usage: string): string {
  if (id === undefined) throw new Error(`usage: show ${usage}`);
  return id;
}
