/** The `covenant` command. */
import { Command, InvalidArgumentError } from 'commander';
import { errorMessage } from '../base/errors.js';
import { runNodeCommand } from './node-command.js';
import { runSandbox } from './sandbox.js';
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

program
  .command('sandbox')
  .description('start a local network for trying Covenant; writes DIR/network.json when ready')
  .option('--nodes <count>', 'number of nodes', positiveInteger, 1)
  .option('--dir <dir>', 'working folder', 'sandbox')
  .option('--node-config <file>', 'JSON fragment deep-merged into every node configuration')
  .option('--ready-timeout <seconds>', 'how long to wait for the service', positiveInteger, 60)
  .action(async (opts: { nodes: number; dir: string; nodeConfig?: string; readyTimeout: number }) => {
    try {
      await runSandbox({
        nodes: opts.nodes,
        dir: opts.dir,
        ...(opts.nodeConfig ? { nodeConfigFile: opts.nodeConfig } : {}),
        readyTimeoutSeconds: opts.readyTimeout,
        print: (line) => process.stdout.write(line + '\n'),
      });
      process.exit(0);
    } catch (e) {
      process.stderr.write(`covenant sandbox: ${errorMessage(e)}\n`);
      process.exit(1);
    }
  });

await program.parseAsync(process.argv);
