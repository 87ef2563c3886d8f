/**
 * What the reference servers of `npm run bench` (baseline-server.ts, floor-server.ts) share, so
 * that they differ only in their handlers: the key and certificate files from the command line,
 * the same TLS options as a Covenant node's RPC interface (client certificates requested, not
 * required; keep-alive; no Nagle), a port chosen by the system and printed on stdout, and a clean
 * exit on SIGTERM.
 *
 *   node dist/bench/<name>-server.js <key.pem> <cert.pem> [arguments of its own]
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';

/** The command-line arguments after the key and certificate files. */
export function ownArguments(): string[] {
  return process.argv.slice(4);
}

export function serveReference(handler: (req: IncomingMessage, res: ServerResponse) => void): void {
  const [keyFile, certFile] = process.argv.slice(2);
  const server = https.createServer(
    { key: readFileSync(keyFile!), cert: readFileSync(certFile!), requestCert: true, rejectUnauthorized: false, keepAliveTimeout: 30_000, noDelay: true },
    handler,
  );
  server.listen(0, '127.0.0.1', () => {
    const address = server.address() as { port: number };
    process.stdout.write(`${address.port}\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
