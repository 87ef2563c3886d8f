/**
 * The joining node's download of a recent snapshot (spec "Join from a snapshot" 3):
 * GET /node/snapshot?since=<seqno> on the peer, following redirects (to the snapshot's name, or
 * to another node that holds one), then GET of the named snapshot. The peer is verified against
 * the service certificate; what is downloaded is verified by the caller before use.
 */
import https from 'node:https';

const REDIRECTS_MAX = 8;
const SNAPSHOT_BYTES_MAX = 4 * 1024 * 1024 * 1024;
const SNAPSHOT_PATH = /^\/node\/snapshot\/(snapshot_\d+_\d+\.committed)$/;

interface Answer {
  status: number;
  location: string | undefined;
  body: Buffer;
}

function get(url: URL, serviceCertificatePem: string, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: Number(url.port || 443),
        method: 'GET',
        path: `${url.pathname}${url.search}`,
        ca: serviceCertificatePem,
        timeout: timeoutMs,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let total = 0;
        res.on('data', (c: Buffer) => {
          total += c.length;
          if (total > SNAPSHOT_BYTES_MAX) req.destroy(new Error(`snapshot larger than ${SNAPSHOT_BYTES_MAX} bytes`));
          else chunks.push(c);
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, location: typeof res.headers.location === 'string' ? res.headers.location : undefined, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`GET ${url.href} timed out`)));
    req.end();
  });
}

/** Undefined when the peer has no committed snapshot newer than `since` (404). Throws on other failures. */
export async function fetchSnapshot(
  targetAddress: string,
  since: number,
  serviceCertificatePem: string,
  timeoutMs = 60_000,
): Promise<{ name: string; bytes: Uint8Array } | undefined> {
  let url = new URL(`https://${targetAddress}/node/snapshot?since=${since}`);
  for (let hop = 0; hop <= REDIRECTS_MAX; hop++) {
    const answer = await get(url, serviceCertificatePem, timeoutMs);
    if (answer.status >= 300 && answer.status < 400 && answer.location !== undefined) {
      url = new URL(answer.location, url);
      continue;
    }
    if (answer.status === 404 && url.pathname === '/node/snapshot') return undefined;
    if (answer.status < 200 || answer.status >= 300) throw new Error(`GET ${url.pathname} answered ${answer.status}`);
    const m = SNAPSHOT_PATH.exec(url.pathname);
    if (!m) throw new Error(`GET ${url.pathname} answered ${answer.status} without naming a snapshot`);
    return { name: m[1]!, bytes: new Uint8Array(answer.body.buffer, answer.body.byteOffset, answer.body.byteLength) };
  }
  throw new Error(`more than ${REDIRECTS_MAX} redirects fetching a snapshot from ${targetAddress}`);
}
