/**
 * `covenant app`: application bundles (docs/apps.md). `bundle` turns a folder (app.json and its
 * modules) into a set_js_app proposal; `deploy` proposes it and has every member of the sandbox's
 * network.json vote for it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { errorMessage } from '../base/errors.js';
import { parseBundle } from '../apps/js/index.js';
import { readBundleDirectory, type BundleJson } from '../apps/js/bundle-files.js';
import { ACCEPT_BALLOT, propose, resolveConnection, vote, type MemberConnection } from './member.js';

/** The bundle of a folder, its shape checked (the service compiles it when the proposal is made). */
export function bundleOf(dir: string): BundleJson {
  const bundle = readBundleDirectory(dir);
  parseBundle(bundle);
  return bundle;
}

export function setJsAppProposal(bundle: BundleJson): { actions: { name: string; args: unknown }[] } {
  return { actions: [{ name: 'set_js_app', args: { bundle } }] };
}

/**
 * Proposes set_js_app with the bundle as the first member, then every member votes for it until
 * it is accepted. Returns the proposal's id and final state.
 */
export async function deployApp(bundle: BundleJson, members: readonly MemberConnection[], print: (line: string) => void): Promise<{ proposalId: string; state: string }> {
  const [proposer] = members;
  if (proposer === undefined) throw new Error('deploying an application needs at least one member');
  const created = await propose(proposer, setJsAppProposal(bundle).actions);
  const proposalId = (created.body as { proposal_id: string }).proposal_id;
  let state = (created.body as { state: string }).state;
  print(`Proposed set_js_app (${bundle.modules.length} modules): proposal ${proposalId}`);
  for (const member of members) {
    if (state !== 'Open') break;
    const voted = await vote(member, proposalId, ACCEPT_BALLOT);
    const body = voted.body as { state: string; failure?: { reason: string } };
    state = body.state;
    if (body.failure) throw new Error(`proposal ${proposalId} failed: ${body.failure.reason}`);
  }
  if (state !== 'Accepted') throw new Error(`proposal ${proposalId} is ${state}, not Accepted`);
  print(`The application is deployed (proposal ${proposalId} accepted)`);
  return { proposalId, state };
}

function fail(what: string, e: unknown): void {
  process.stderr.write(`covenant app ${what}: ${errorMessage(e)}\n`);
  process.exitCode = 1;
}

export function registerAppCommands(program: Command): void {
  const app = program.command('app').description('JavaScript application bundles deployed by governance (set_js_app)');

  app
    .command('bundle <dir>')
    .description('build the set_js_app proposal of a folder holding app.json and its JavaScript modules')
    .option('--out <file>', 'write the proposal here (default: standard output)')
    .action((dir: string, opts: { out?: string }) => {
      try {
        const text = JSON.stringify(setJsAppProposal(bundleOf(dir)), null, 2) + '\n';
        if (opts.out === undefined) process.stdout.write(text);
        else writeFileSync(opts.out, text);
      } catch (e) {
        fail('bundle', e);
      }
    });

  app
    .command('deploy <dir>')
    .description("propose the folder's application and have every member of network.json vote for it")
    .requiredOption('--network <file>', 'network.json written by `covenant sandbox`')
    .action(async (dir: string, opts: { network: string }) => {
      try {
        const network = JSON.parse(readFileSync(opts.network, 'utf8')) as { members: unknown[] };
        const members = network.members.map((_m, i) => resolveConnection({ network: opts.network, member: i }));
        await deployApp(bundleOf(dir), members, (line) => process.stdout.write(`${line}\n`));
      } catch (e) {
        fail('deploy', e);
      }
    });
}
