/** Linux /proc readings for the benchmarks; NaN where /proc is not available. */
import { readFileSync } from 'node:fs';

/** CPU time (user + system) used so far, in µs: of a process, or of one of its threads. */
export function cpuUs(pid: number, tid?: number): number {
  try {
    const path = tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`;
    const fields = readFileSync(path, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000; // clock ticks of 10 ms
  } catch {
    return NaN;
  }
}

export function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}
