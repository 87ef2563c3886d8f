/**
 * Consensus scenarios as short scripts, run on the simulated cluster with a deterministic
 * network (one tick of delay, no loss). Every command echoes itself and the events it caused; the
 * whole output is the scenario's trace, checked in next to the script and reviewed when it changes.
 *
 *   cluster n1 n2 n3            start these nodes, all in the genesis configuration (first command)
 *   tick [N]                    N rounds: deliver due messages, tick every live node, persist and send
 *   campaign n1                 n1 stands for election now (PreVote first)
 *   elect n1                    campaign n1, then run rounds until it is primary (fails after 50)
 *   propose n1 [N]              n1 appends N normal entries (reported if refused)
 *   sign n1                     n1 appends a signature entry
 *   read n1                     n1 is asked a linearizable read (ReadIndex); its confirmation or abandonment is traced
 *   reconfigure n1 n1 n2 n4     n1 appends a configuration; unknown nodes join from a committed snapshot
 *   partition n1 n2 | n3        cut every link between the groups;  isolate n1;  block n1 n2 (one way)
 *   heal                        remove every partition
 *   crash n1 / restart n1       lose what n1 had not persisted / start it again from its disk
 *   disk-stall n1 / disk-resume n1   n1 stops / resumes persisting (and so sending)
 *   status                      one line per node
 *   expect primary n1 | expect no-primary | expect role n1 Backup | expect view n1 2
 *   expect commit n1 5 | expect last n1 6 | expect configs n1 [n1 n2] [n1 n2 n3]
 *   expect stage n1 Completed (or -)  — `*` in place of a node means every live node
 *
 * Lines starting with # are comments and are copied to the trace.
 */
import type { NodeId } from '../../base/index.js';
import type { RaftStatus } from '../../consensus/index.js';
import { Prng } from '../prng.js';
import { Cluster, type SimNode } from './cluster.js';

export class ScenarioError extends Error {
  constructor(
    lineNumber: number,
    line: string,
    message: string,
    /** The trace up to the failure. */
    readonly partialTrace: string,
  ) {
    super(`line ${lineNumber} (${line}): ${message}`);
    this.name = 'ScenarioError';
  }
}

const MAX_ELECTION_ROUNDS = 50;
const MAX_TICKS_PER_COMMAND = 10_000;

function describeStatus(s: RaftStatus, alive: boolean): string {
  if (!alive) return `${s.id}: down`;
  const configs = s.configs.map((c) => `[${c.nodes.join(' ')}]`).join(' ');
  return (
    `${s.id}: ${s.role} view=${s.view} primary=${s.primaryId ?? '-'} commit=${s.commitSeqno} last=${s.lastSeqno} ` +
    `signed=${s.lastSignatureSeqno} configs=${configs} stage=${s.retirementStage ?? '-'}`
  );
}

export function runScenario(text: string, seed = 1): string {
  const out: string[] = [];
  let cluster: Cluster | undefined;
  let traceIndex = 0;
  const stalled = new Set<NodeId>();
  let nowTicks = 0;

  const flushEvents = (): void => {
    if (cluster === undefined) return;
    const lines = cluster.trace.lines;
    for (; traceIndex < lines.length; traceIndex++) out.push(`  ${lines[traceIndex]}`);
  };
  const need = (): Cluster => {
    if (cluster === undefined) throw new Error('start with `cluster ...`');
    return cluster;
  };
  const nodeOf = (id: string | undefined): SimNode => {
    if (id === undefined) throw new Error('a node id is missing');
    return need().node(id);
  };
  const round = (withTicks: boolean): void => {
    const c = need();
    nowTicks++;
    c.setTime(nowTicks);
    c.deliverDue();
    if (withTicks) for (const node of c.liveNodes()) c.tick(node);
    for (const node of c.liveNodes()) if (!stalled.has(node.id)) c.io(node);
  };
  const statusOf = (node: SimNode): RaftStatus => {
    if (node.raft === undefined) throw new Error(`${node.id} is down`);
    return node.raft.status();
  };
  const targets = (id: string | undefined): SimNode[] => (id === '*' ? need().liveNodes() : [nodeOf(id)]);
  const parseConfigs = (words: readonly string[]): string[][] => {
    const text = words.join(' ');
    const groups = [...text.matchAll(/\[([^\]]*)\]/g)].map((m) => m[1]!.trim().split(/\s+/).filter(Boolean));
    if (groups.length === 0) throw new Error('configurations are written [a b c] [a b]');
    return groups;
  };

  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    if (line.startsWith('#')) {
      out.push(line);
      continue;
    }
    out.push(`> ${line}`);
    const [command, ...args] = line.split(/\s+/);
    try {
      switch (command) {
        case 'cluster': {
          if (cluster !== undefined) throw new Error('only one cluster per scenario');
          if (args.length === 0) throw new Error('name the nodes');
          cluster = new Cluster(
            {
              rng: new Prng(seed),
              raft: { electionTimeoutTicks: 10, heartbeatTicks: 2, maxBatchEntries: 64, maxBatchBytes: 65_536, maxUncommittedEntries: 100 },
              network: { lossProbability: 0, duplicateProbability: 0, minDelayTicks: 1, maxDelayTicks: 1 },
              traceCommits: true,
            },
            args,
          );
          break;
        }
        case 'tick': {
          const n = args[0] === undefined ? 1 : Number(args[0]);
          if (!Number.isSafeInteger(n) || n < 1 || n > MAX_TICKS_PER_COMMAND) throw new Error('tick takes a count');
          for (let t = 0; t < n; t++) round(true);
          break;
        }
        case 'campaign':
          need().campaign(nodeOf(args[0]));
          break;
        case 'elect': {
          const node = nodeOf(args[0]);
          need().campaign(node);
          let rounds = 0;
          while (statusOf(node).role !== 'Primary') {
            if (++rounds > MAX_ELECTION_ROUNDS) throw new Error(`${node.id} did not become primary`);
            round(false);
          }
          // Let the new primary persist and send its first work (its signature among it).
          if (!stalled.has(node.id)) need().io(node);
          break;
        }
        case 'propose': {
          const node = nodeOf(args[0]);
          const n = args[1] === undefined ? 1 : Number(args[1]);
          for (let k = 0; k < n; k++) {
            const entry = need().propose(node, 'normal');
            out.push(entry === undefined ? `  refused` : `  ${node.id} appends normal ${entry.view}.${entry.seqno}`);
          }
          break;
        }
        case 'sign': {
          const node = nodeOf(args[0]);
          if (need().propose(node, 'signature') === undefined) out.push('  refused');
          break;
        }
        case 'read': {
          if (need().requestRead(nodeOf(args[0])) === undefined) out.push('  refused (not primary)');
          break;
        }
        case 'reconfigure': {
          const node = nodeOf(args[0]);
          const members = args.slice(1);
          if (members.length === 0) throw new Error('name the members');
          for (const id of members) if (!need().nodes.has(id)) need().createJoiner(id);
          if (need().propose(node, 'reconfiguration', { configuration: members }) === undefined) out.push('  refused');
          break;
        }
        case 'partition': {
          const bar = args.indexOf('|');
          if (bar <= 0 || bar === args.length - 1) throw new Error('partition a b | c d');
          need().network.partition(args.slice(0, bar), args.slice(bar + 1));
          break;
        }
        case 'isolate': {
          const node = nodeOf(args[0]);
          need().network.partition([node.id], [...need().nodes.keys()].filter((id) => id !== node.id));
          break;
        }
        case 'block':
          need().network.block(nodeOf(args[0]).id, nodeOf(args[1]).id);
          break;
        case 'heal':
          need().network.heal();
          break;
        case 'crash':
          need().crash(nodeOf(args[0]));
          break;
        case 'restart':
          need().restart(nodeOf(args[0]));
          break;
        case 'disk-stall':
          stalled.add(nodeOf(args[0]).id);
          break;
        case 'disk-resume':
          stalled.delete(nodeOf(args[0]).id);
          break;
        case 'status':
          for (const node of need().nodes.values()) {
            out.push(`  ${node.alive ? describeStatus(node.raft!.status(), true) : `${node.id}: down`}`);
          }
          break;
        case 'expect':
          out.push(`  ${expect(args)}`);
          break;
        default:
          throw new Error(`unknown command ${command}`);
      }
    } catch (e) {
      flushEvents();
      throw new ScenarioError(i + 1, line, e instanceof Error ? e.message : String(e), `${out.join('\n')}\n`);
    }
    flushEvents();
  }
  return `${out.join('\n')}\n`;

  function expect(args: string[]): string {
    const [what, id, ...rest] = args;
    const check = (ok: boolean, message: string): string => {
      if (!ok) throw new Error(`expected ${args.join(' ')}: ${message}`);
      return `ok: ${args.join(' ')}`;
    };
    switch (what) {
      case 'primary': {
        const primaries = need().primaries().map((n) => n.id);
        return check(primaries.length === 1 && primaries[0] === id, `primaries are [${primaries.join(' ')}]`);
      }
      case 'no-primary': {
        const primaries = need().primaries().map((n) => n.id);
        return check(primaries.length === 0, `primaries are [${primaries.join(' ')}]`);
      }
      case 'role':
      case 'view':
      case 'commit':
      case 'last':
      case 'stage': {
        const wanted = rest[0];
        for (const node of targets(id)) {
          const s = statusOf(node);
          const actual = { role: s.role, view: String(s.view), commit: String(s.commitSeqno), last: String(s.lastSeqno), stage: s.retirementStage ?? '-' }[what];
          check(actual === wanted, `${node.id} has ${what} ${actual}`);
        }
        return `ok: ${args.join(' ')}`;
      }
      case 'configs': {
        const wanted = JSON.stringify(parseConfigs(rest));
        for (const node of targets(id)) {
          const actual = JSON.stringify(statusOf(node).configs.map((c) => [...c.nodes]));
          check(actual === wanted, `${node.id} has configs ${actual}`);
        }
        return `ok: ${args.join(' ')}`;
      }
      default:
        throw new Error(`unknown expectation ${what}`);
    }
  }
}
