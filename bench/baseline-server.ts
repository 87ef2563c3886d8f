/**
 * The baseline of `npm run bench`: a minimal node:https server answering a constant JSON body,
 * with the same TLS key type and client-certificate request as a Covenant node. Prints its port.
 */
import https from 'node:https';
import { readFileSync } from 'node:fs';

const [keyFile, certFile] = process.argv.slice(2);
const body = JSON.stringify(true);
const server = https.createServer(
  { key: readFileSync(keyFile!), cert: readFileSync(certFile!), requestCert: true, rejectUnauthorized: false, keepAliveTimeout: 30_000, noDelay: true },
  (req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('content-length', Buffer.byteLength(body));
      res.end(body);
    });
  },
);
server.listen(0, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stdout.write(`${address.port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
