/**
 * The baseline of `npm run bench`: a minimal node:https server answering a constant JSON body,
 * with the same TLS key type and client-certificate request as a Covenant node. Prints its port.
 *
 *   node dist/bench/baseline-server.js <key.pem> <cert.pem>
 */
import { serveReference } from './reference-server.js';

const body = JSON.stringify(true);
serveReference((req, res) => {
  req.resume();
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    res.setHeader('content-length', Buffer.byteLength(body));
    res.end(body);
  });
});
