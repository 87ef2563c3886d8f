/** The `covenant` command. */
import { Command, InvalidArgumentError } from 'commander';
import { errorMessage } from '../base/errors.js';
import { readFileSync } from 'node:fs';
import { consoleOutput, runLedgerDownload, runLedgerVerify, runSnapshotInspect } from './ledger-tools.js';
import { registerMemberCommands } from './member.js';
import { fetchServiceEndorsements, runReceiptVerify } from './receipt-tools.js';
import { runNodeCommand } from './node-command.js';
import { runSandbox } from './sandbox.js';
import { runSandboxAddNode } from './sandbox-add-node.js';
import { runSandboxRecovery } from './sandbox-recover.js';
import { registerStatementCommands } from './statement.js';
import { registerAppCommands } from './app.js';
import { COVENANT_VERSION } from './version.js';

function positiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

const program = new Command();
program.name('covenant').description('Covenant: a replicated, verifiable ledger service').version(COVENANT_VERSION);

program
  .command('node')
  .description('run one node (command.type Start, Join or Recover) from a configuration file')
  .requiredOption('--config <file>', 'node configuration file (node.json)')
  .action(async (opts: { config: string }) => {
    await runNodeCommand(opts.config);
  });

const sandbox = program
  .command('sandbox')
  .description('start a local network for trying Covenant; writes DIR/network.json when ready')
  .option('--nodes <count>', 'number of nodes', positiveInteger, 3)
  .option('--dir <dir>', 'working folder (with --recover-from: default <old dir>-recovered)', 'sandbox')
  .option('--node-config <file>', 'JSON fragment deep-merged into every node configuration')
  .option('--ready-timeout <seconds>', 'how long to wait for the service', positiveInteger, 60)
  .option('--recover-from <dir>', "recover an old sandbox's network from its ledgers (with member shares; by sealing when it was started with --sealing)")
  .option('--sealing', 'configure sealing-based recovery on every node (each a location of the recovery decision protocol)')
  .option('--force', 'wipe DIR if it already holds anything (its keys and ledgers are lost); refused without it')
  .option('--app <dir>', 'deploy the application bundle in this folder (app.json and its modules) once the service is open')
  .action(async (opts: { nodes: number; dir: string; nodeConfig?: string; readyTimeout: number; recoverFrom?: string; sealing?: boolean; force?: boolean; app?: string }, command: Command) => {
    const print = (line: string) => process.stdout.write(line + '\n');
    const common = { ...(opts.nodeConfig ? { nodeConfigFile: opts.nodeConfig } : {}), readyTimeoutSeconds: opts.readyTimeout, force: opts.force === true, print };
    try {
      if (opts.recoverFrom !== undefined) {
        const dir = command.getOptionValueSource('dir') === 'default' ? `${opts.recoverFrom.replace(/\/+$/, '')}-recovered` : opts.dir;
        await runSandboxRecovery({ from: opts.recoverFrom, dir, ...common });
      } else {
        await runSandbox({ nodes: opts.nodes, dir: opts.dir, sealing: opts.sealing === true, ...(opts.app !== undefined ? { appDir: opts.app } : {}), ...common });
      }
      process.exit(0);
    } catch (e) {
      process.stderr.write(`covenant sandbox: ${errorMessage(e)}\n`);
      process.exit(1);
    }
  });

sandbox
  .command('add-node')
  .description('join one more node to a running sandbox (member 0 trusts it); records it in network.json')
  .option('--network <file>', "the running sandbox's network.json", 'sandbox/network.json')
  .option('--ready-timeout <seconds>', 'how long to wait for the node to join', positiveInteger, 60)
  .action(async (opts: { network: string; readyTimeout: number }) => {
    try {
      await runSandboxAddNode({ network: opts.network, readyTimeoutSeconds: opts.readyTimeout, print: (line) => process.stdout.write(line + '\n') });
      process.exit(0);
    } catch (e) {
      process.stderr.write(`covenant sandbox add-node: ${errorMessage(e)}\n`);
      process.exit(1);
    }
  });

function nonNegativeInteger(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('must be a non-negative integer');
  return n;
}

const ledger = program.command('ledger').description('inspect, verify and fetch ledger files offline');
ledger
  .command('verify')
  .description('check every entry frame, chunk boundary, Merkle root and signature of a ledger')
  .argument('<directories...>', 'ledger directories (the main one and read-only ones)')
  .option('--service-cert <file>', 'the newest service certificate: it must endorse every signing node, directly or through the recoveries the ledger records')
  .option('--snapshot <file>', 'committed snapshot the ledger starts after')
  .action((directories: string[], opts: { serviceCert?: string; snapshot?: string }) => {
    try {
      process.exitCode = runLedgerVerify(
        { directories, ...(opts.serviceCert ? { serviceCertificateFile: opts.serviceCert } : {}), ...(opts.snapshot ? { snapshotFile: opts.snapshot } : {}) },
        consoleOutput(),
      );
    } catch (e) {
      process.stderr.write(`covenant ledger verify: ${errorMessage(e)}\n`);
      process.exitCode = 2;
    }
  });
ledger
  .command('download')
  .description('fetch committed ledger chunks from a node, each checked against its Repr-Digest')
  .requiredOption('--from <host:port>', 'RPC address of any node (redirects are followed)')
  .requiredOption('--since <seqno>', 'first seqno wanted', nonNegativeInteger)
  .requiredOption('--to <dir>', 'directory the chunks are written to')
  .requiredOption('--ca <file>', 'service certificate (TLS certificate authority)')
  .action(async (opts: { from: string; since: number; to: string; ca: string }) => {
    process.exitCode = await runLedgerDownload({ from: opts.from, since: opts.since, to: opts.to, caFile: opts.ca }, consoleOutput());
  });

program
  .command('snapshot')
  .description('snapshot files')
  .command('inspect')
  .description('print the header and the public maps of a snapshot file')
  .argument('<file>', 'snapshot file')
  .action((file: string) => {
    try {
      process.exitCode = runSnapshotInspect(file, consoleOutput());
    } catch (e) {
      process.stderr.write(`covenant snapshot inspect: ${errorMessage(e)}\n`);
      process.exitCode = 2;
    }
  });

program
  .command('receipt')
  .description('transaction receipts')
  .command('verify')
  .description('check a receipt (JSON from /node/receipt or COSE from /node/receipt/cose) against the service certificate')
  .argument('<file>', 'receipt file')
  .requiredOption('--service-cert <file>', 'service certificate (the newest one)')
  .option('--endorsements <file>', 'the service\'s chain of endorsements (GET /node/service/endorsements), for a receipt kept from before a recovery')
  .option('--endorsements-from <host:port>', 'fetch that chain from a node, whose TLS certificate the service certificate must have issued')
  .option('--claims <file>', 'the application\'s claim (its bytes): the receipt must bind their SHA-256 as its claims digest')
  .option('--claims-digest <hex>', 'the claims digest (64 hex digits) the receipt must bind')
  .action(async (file: string, opts: { serviceCert: string; endorsements?: string; endorsementsFrom?: string; claims?: string; claimsDigest?: string }) => {
    let endorsements: unknown;
    if (opts.endorsementsFrom !== undefined) {
      try {
        endorsements = await fetchServiceEndorsements(opts.endorsementsFrom, readFileSync(opts.serviceCert, 'utf8'));
      } catch (e) {
        process.stderr.write(`covenant receipt verify: ${errorMessage(e)}\n`);
        process.exitCode = 2;
        return;
      }
    }
    process.exitCode = runReceiptVerify(
      {
        receiptFile: file,
        serviceCertificateFile: opts.serviceCert,
        ...(opts.endorsements !== undefined ? { endorsementsFile: opts.endorsements } : {}),
        ...(endorsements !== undefined ? { endorsements } : {}),
        ...(opts.claims !== undefined ? { claimsFile: opts.claims } : {}),
        ...(opts.claimsDigest !== undefined ? { claimsDigest: opts.claimsDigest } : {}),
      },
      consoleOutput(),
    );
  });

registerMemberCommands(program);
registerStatementCommands(program);
registerAppCommands(program);

await program.parseAsync(process.argv);
