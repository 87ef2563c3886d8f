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
import { HttpsClient, type HttpAnswer } from '../platform/https-client.js';
import { decryptShare } from '../recovery/index.js';

export interface MemberConnection {
  /** host:port of a node's RPC interface. */
  readonly address: string;
  /**
   * Other nodes' addresses, tried in order when `address` (and each one before) cannot be
   * connected to at all or knows no primary: the request was not executed there, so sending it
   * elsewhere cannot apply it twice.
   */
  readonly fallbackAddresses?: readonly string[];
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

/** Errors raised before a request reached a node (nothing was sent): another node may be tried. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

/** How many 307/308 redirects (to the primary) one governance request follows. */
const REDIRECTS_MAX = 3;

function isUnreachable(e: unknown): boolean {
  return UNREACHABLE.has((e as { code?: string }).code ?? '');
}

/** The host:port of a redirect's Location (absolute https URL), or undefined when it names none. */
function redirectTarget(location: unknown): { address: string; path: string } | undefined {
  if (typeof location !== 'string') return undefined;
  try {
    const url = new URL(location);
    if (url.protocol !== 'https:' || url.port === '') return undefined;
    return { address: `${url.hostname.includes(':') ? `[${url.hostname.replace(/^\[|\]$/g, '')}]` : url.hostname}:${url.port}`, path: `${url.pathname}${url.search}` };
  } catch {
    return undefined;
  }
}

/** One HTTPS request to one address; follows redirects to the primary. */
async function requestAt(connection: MemberConnection, address: string, method: string, path: string, body?: Uint8Array): Promise<HttpAnswer> {
  let target = { address, path };
  for (let hop = 0; ; hop++) {
    const client = new HttpsClient(target.address, connection.caPem);
    let answer: HttpAnswer;
    try {
      answer = await client.request(method, target.path, {
        ...(body !== undefined ? { rawBody: Buffer.from(body), headers: { 'content-type': COSE_CONTENT_TYPE } } : {}),
        timeoutMs: REQUEST_TIMEOUT_MS,
      });
    } finally {
      client.close();
    }
    const next = answer.status === 307 || answer.status === 308 ? redirectTarget(answer.headers.location) : undefined;
    if (next === undefined) return answer;
    if (hop >= REDIRECTS_MAX) throw new Error(`${method} ${path}: more than ${REDIRECTS_MAX} redirects (last to ${String(answer.headers.location)})`);
    target = next;
  }
}

/** How long a governance request waits for a primary (an election) before it reports NoPrimary. */
const NO_PRIMARY_WAIT_MS = 30_000;
/** The pause between rounds over the nodes while none knows a primary. */
const NO_PRIMARY_PAUSE_MS = 250;

function isNoPrimary(answer: HttpAnswer): boolean {
  return answer.status === 503 && (answer.body as { error?: { code?: unknown } } | undefined)?.error?.code === 'NoPrimary';
}

/**
 * One governance request: to the connection's node, else (when it cannot be reached at all, or
 * knows no primary) to each fallback in turn; redirects to the primary followed. While no node
 * knows a primary (an election is under way) the round is tried again, for up to
 * NO_PRIMARY_WAIT_MS: a request answered NoPrimary was not executed, so sending it again cannot
 * apply it twice. JSON answer; non-2xx answers become GovRequestFailed.
 */
export async function govRequest(connection: MemberConnection, method: string, path: string, body?: Uint8Array): Promise<GovAnswer> {
  const addresses = [connection.address, ...(connection.fallbackAddresses ?? []).filter((a) => a !== connection.address)];
  const deadline = Date.now() + NO_PRIMARY_WAIT_MS;
  let answer: HttpAnswer | undefined;
  for (;;) {
    const unreachable: string[] = [];
    let noPrimary: HttpAnswer | undefined;
    answer = undefined;
    for (const address of addresses) {
      try {
        const reply = await requestAt(connection, address, method, path, body);
        if (isNoPrimary(reply)) {
          noPrimary = reply;
          continue;
        }
        answer = reply;
        break;
      } catch (e) {
        if (!isUnreachable(e)) throw e;
        unreachable.push(`${address} (${(e as { code?: string }).code})`);
      }
    }
    if (answer !== undefined) break;
    if (noPrimary === undefined) throw new Error(`no node answered: ${unreachable.join(', ')}`);
    if (Date.now() + NO_PRIMARY_PAUSE_MS > deadline) {
      answer = noPrimary;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, NO_PRIMARY_PAUSE_MS));
  }
  const parsed = answer.body ?? (answer.text.length > 0 ? answer.text : undefined);
  if (answer.status < 200 || answer.status >= 300) {
    const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new GovRequestFailed(answer.status, error?.code ?? 'HttpError', error?.message ?? answer.text);
  }
  const txId = answer.headers['x-covenant-transaction-id'];
  return { status: answer.status, transactionId: typeof txId === 'string' ? txId : undefined, body: parsed };
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
 * transition_service_to_open, vote for it (passProposal). Resolves once the service reports Open.
 */
export async function openService(
  connection: MemberConnection,
  onRetry: (reason: string) => void = () => undefined,
): Promise<{ proposalId: string; transactionId: string | undefined }> {
  const me = await govRequest(connection, 'GET', `/gov/members/${connection.memberId}`);
  if ((me.body as { status: string }).status !== 'Active') await ack(connection);
  const passed = await passProposal(connection, [{ name: 'transition_service_to_open', args: {} }], 'the proposal to open the service', onRetry);
  const service = await govRequest(connection, 'GET', '/gov/service/info');
  if ((service.body as { status: string }).status !== 'Open') throw new Error(`the service is ${(service.body as { status: string }).status} after the proposal was accepted`);
  return passed;
}

/**
 * One member proposes `actions` and votes for them; resolves once the proposal is Accepted.
 *
 * A proposal that fails only because member JavaScript ran out of its time budget (the node was
 * too busy to run it in time: the default constitution's work is tiny), when the constitution is
 * loaded, validates it or resolves it, is proposed again, at most OPEN_ATTEMPTS_MAX times in all, each retry reported to
 * `onRetry`; any other failure is thrown.
 */
export async function passProposal(
  connection: MemberConnection,
  actions: unknown[],
  what: string,
  onRetry: (reason: string) => void = () => undefined,
): Promise<{ proposalId: string; transactionId: string | undefined }> {
  for (let attempt = 1; ; attempt++) {
    let proposal: GovAnswer;
    try {
      proposal = await propose(connection, actions);
    } catch (e) {
      if (e instanceof GovRequestFailed && CREATION_TIMED_OUT.test(e.message) && attempt < OPEN_ATTEMPTS_MAX) {
        onRetry(`${what} could not be created (${e.message}); proposing again`);
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
    if (state === 'Accepted') return { proposalId, transactionId };
    const info = (await govRequest(connection, 'GET', `/gov/members/proposals/${proposalId}`)).body as { failure?: { reason: string } };
    const reason = info.failure?.reason;
    if (state === 'Failed' && reason !== undefined && TIMED_OUT.test(reason) && attempt < OPEN_ATTEMPTS_MAX) {
      onRetry(`${what} failed (${reason}); proposing again`);
      continue;
    }
    throw new Error(`${what} is ${state}${reason !== undefined ? `: ${reason}` : ''} (more members may need to vote)`);
  }
}

/** How many proposals openService and passProposal make when member JavaScript runs out of time. */
export const OPEN_ATTEMPTS_MAX = 3;

/** A proposal's failure reason when member JavaScript ran out of its time budget (src/gov/governance.ts). */
const TIMED_OUT = /^(resolve|apply|ballot of member [0-9a-f]+) failed: Timeout: /;

/**
 * A proposal refused at creation because member JavaScript ran out of its time budget: the
 * constitution's module loading (ConstitutionFailure) or its validate (ProposalFailedToValidate).
 */
const CREATION_TIMED_OUT = /^(ConstitutionFailure \(500\): the constitution could not be loaded|ProposalFailedToValidate \(400\): the constitution's validate failed): Timeout: /;

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
  // Every node of network.json, in its order: the first that can be reached takes the request.
  const networkAddresses = (network?.nodes ?? []).map((n) => n.rpc_address).filter((a) => typeof a === 'string' && a !== '');
  const address = flags.address ?? networkAddresses[0];
  const missing = [
    certFile === undefined ? '--cert' : undefined,
    keyFile === undefined ? '--key' : undefined,
    caFile === undefined ? '--ca' : undefined,
    address === undefined ? '--address' : undefined,
  ].filter((x) => x !== undefined);
  if (missing.length > 0) throw new Error(`give --network <network.json> or ${missing.join(', ')}`);
  const certificatePem = readFileSync(certFile!, 'utf8');
  return {
    address: address!,
    ...(flags.address === undefined && networkAddresses.length > 1 ? { fallbackAddresses: networkAddresses.slice(1) } : {}),
    caPem: readFileSync(caFile!, 'utf8'),
    certificatePem,
    privateKeyPem: readFileSync(keyFile!, 'utf8'),
    memberId: certificateId(certificatePem),
  };
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
    .option('--network <file>', 'network.json written by `covenant sandbox` (its nodes are tried in turn until one answers)')
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

/** A JSON option's text: inline, or `@file` for the contents of a file. */
function jsonOptionText(flag: string, value: string): string {
  if (!value.startsWith('@')) return value;
  try {
    return readFileSync(value.slice(1), 'utf8');
  } catch (e) {
    throw new Error(`${flag} ${value}: cannot read ${value.slice(1)} (${errorMessage(e)})`);
  }
}

function readActions(opts: { actions?: string; action?: string; args?: string; argsFile?: string }): unknown[] {
  if ((opts.actions === undefined) === (opts.action === undefined)) throw new Error('give either --actions <file> or --action <name> [--args <json> | --args @file.json | --args-file <file>]');
  if (opts.actions !== undefined) {
    const parsed = JSON.parse(readFileSync(opts.actions, 'utf8')) as unknown;
    if (Array.isArray(parsed)) return parsed;
    const actions = (parsed as { actions?: unknown } | null)?.actions;
    if (!Array.isArray(actions)) throw new Error(`${opts.actions} must hold an array of actions or {"actions": [...]}`);
    return actions;
  }
  if (opts.args !== undefined && opts.argsFile !== undefined) throw new Error('give --args or --args-file, not both');
  const [flag, text] = opts.argsFile !== undefined ? ['--args-file', jsonOptionText('--args-file', `@${opts.argsFile}`)] : ['--args', opts.args === undefined ? undefined : jsonOptionText('--args', opts.args)];
  let args: unknown = {};
  if (text !== undefined) {
    try {
      args = JSON.parse(text) as unknown;
    } catch (e) {
      throw new Error(`${flag} is not JSON: ${errorMessage(e)}`);
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
    .option('--args <json>', 'arguments of --action: JSON, or @file.json for a file holding it')
    .option('--args-file <file>', 'arguments of --action, from a JSON file')
    .action((opts: Flags) => run('propose', () => propose(resolveConnection(opts), readActions(opts as { actions?: string; action?: string; args?: string; argsFile?: string }))));

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
