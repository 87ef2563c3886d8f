/**
 * Load from an external C load generator: ApacheBench (`ab`, Debian package apache2-utils), as
 * docs/architecture.md ("Dependencies") prescribes for headline numbers (its `wrk` cannot present the TLS client certificate
 * the logging application requires; `ab -E` can). A generator in C takes less of a small
 * machine's CPU than one in Node.js (≈ 11 µs per request here against ≈ 16–22), so more of it is
 * left to the server being measured. `ab` sends the same request every time (one record id).
 */
import { spawn, spawnSync } from 'node:child_process';

export interface AbOptions {
  readonly url: string;
  /** A PEM file holding the client certificate and its private key. */
  readonly clientCertKeyFile: string;
  /** The JSON body POSTed by every request. */
  readonly bodyFile: string;
  readonly connections: number;
  readonly durationS: number;
  /** Run ab on these cores only (`taskset -c`; see placement.ts). */
  readonly cores?: string;
  /** Extra request headers, "name: value" each. */
  readonly headers?: readonly string[];
}

export interface AbResult {
  readonly requests: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly requestsPerSecond: number;
  /** ab's own CPU time (user + system) per request, in µs. */
  readonly generatorCpuUs: number;
}

/** Whether `ab` can be run here. */
export function abAvailable(): boolean {
  const probe = spawnSync('ab', ['-V'], { stdio: 'ignore' });
  return probe.error === undefined && probe.status === 0;
}

function field(output: string, label: string): number {
  const m = new RegExp(`^${label}:\\s+([\\d.]+)`, 'm').exec(output);
  return m ? Number(m[1]) : 0;
}

/** `times` prints the shell's own and then its children's user and system times: "0m1.23s 0m4.56s". */
function childCpuSeconds(timesOutput: string): number {
  const lines = timesOutput.trim().split('\n');
  const children = lines.at(-1) ?? '';
  let total = 0;
  for (const m of children.matchAll(/(\d+)m([\d.]+)s/g)) total += Number(m[1]) * 60 + Number(m[2]);
  return total;
}

/** Runs ab for durationS seconds (keep-alive, `connections` concurrent clients, POST of bodyFile). */
export async function runAb(options: AbOptions): Promise<AbResult> {
  const args = [
    '-q',
    '-k',
    '-c',
    String(options.connections),
    '-t',
    String(options.durationS),
    // -t alone stops at 50,000 requests: give a bound that the duration reaches first.
    '-n',
    '100000000',
    '-E',
    options.clientCertKeyFile,
    '-p',
    options.bodyFile,
    '-T',
    'application/json',
    ...(options.headers ?? []).flatMap((h) => ['-H', h]),
    options.url,
  ];
  // Through a shell so that its `times` reports ab's CPU once ab has exited.
  const quoted = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const command = options.cores === undefined ? 'ab' : `taskset -c '${options.cores.replace(/'/g, '')}' ab`;
  const child = spawn('sh', ['-c', `${command} ${quoted}; status=$?; echo '--times--'; times; exit $status`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const status = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const [report = '', times = ''] = stdout.split('--times--');
  const requests = field(report, 'Complete requests');
  if (status !== 0 || requests === 0) {
    throw new Error(`ab failed (exit ${status}): ${(stderr || report).trim().split('\n').slice(-3).join(' | ')}`);
  }
  return {
    requests,
    non2xx: field(report, 'Non-2xx responses'),
    errors: field(report, 'Failed requests'),
    requestsPerSecond: field(report, 'Requests per second'),
    generatorCpuUs: (childCpuSeconds(times) * 1e6) / requests,
  };
}
