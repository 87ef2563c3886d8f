/**
 * The low-level checks of a connection and its request head, before any route sees it: TLS
 * failures, requests Node's HTTP parser refuses, CONNECT, the HTTP version and the Host header.
 * Every refusal that can still be answered carries the JSON error body like every other answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { CovenantError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { SessionTable } from './sessions.js';

/** A session whose request the HTTP parser refused is closed this long after its error answer, read or not. */
const CLIENT_ERROR_LINGER_MS = 2_000;

/** What clientError needs of its interface. */
export interface ClientErrorContext {
  readonly interfaceName: string;
  readonly logger: Logger;
  readonly sessions: Pick<SessionTable, 'isSession' | 'countHandshakeTimeout'>;
}

/**
 * A TLS error (no handshake in time, not TLS at all) or a request the HTTP parser refused. A
 * socket whose handshake never completed cannot carry an answer: ending it would wait forever
 * for a flush, holding the connection (and its share of the caps), so it is destroyed.
 */
export function handleClientError(err: NodeJS.ErrnoException, socket: Socket, context: ClientErrorContext): void {
  const isHttpError = typeof err.code === 'string' && err.code.startsWith('HPE_');
  if (!isHttpError || !context.sessions.isSession(socket) || !socket.writable) {
    if (err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT') context.sessions.countHandshakeTimeout();
    context.logger.debug('TLS connection failed', { interface: context.interfaceName, reason: err.message });
    socket.destroy();
    return;
  }
  context.logger.debug('malformed HTTP request', { interface: context.interfaceName, reason: err.message });
  socket.end(clientErrorAnswer(err));
  // A client that does not read its answer does not keep the connection.
  setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
}

/** CONNECT (no tunnels here): 405 with the error body, then the connection is closed. */
export function refuseConnect(req: IncomingMessage, socket: Socket): void {
  const error = new CovenantError('MethodNotAllowed', `${req.method ?? 'CONNECT'} is not supported: this node is not a proxy`, 405);
  const text = JSON.stringify(error.toBody());
  socket.end(
    `HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD, POST, PUT, DELETE\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
  setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
}

/**
 * Refuses (throws) a request head the parser let through but this node does not serve: an HTTP
 * version other than 1.0 or 1.1 (505, connection closed), an HTTP/1.1 request without Host, or
 * any request with more than one Host (400).
 */
export function checkRequestHead(req: IncomingMessage, res: ServerResponse): void {
  if (req.httpVersionMajor !== 1 || req.httpVersionMinor > 1) {
    res.setHeader('connection', 'close');
    throw new CovenantError('HttpVersionNotSupported', `HTTP/${req.httpVersion} is not supported: send HTTP/1.1`, 505);
  }
  if (req.headers.host === undefined) {
    if (req.httpVersionMinor === 1) throw new CovenantError('MissingHostHeader', 'an HTTP/1.1 request must carry a Host header (RFC 9112)', 400);
  } else if (hostHeaderCount(req.rawHeaders) > 1) {
    // Node keeps the first and drops the others; which one a proxy in front used is unknowable.
    throw new CovenantError('DuplicateHostHeader', 'the request carries more than one Host header (RFC 9112)', 400);
  }
}

/**
 * The answer to a request Node's HTTP parser refuses before any route sees it: the error body
 * like every other answer, 431 for oversized headers, 503 for a pipeline Node had to stop, and
 * the connection closed.
 */
function clientErrorAnswer(err: NodeJS.ErrnoException): string {
  let error: CovenantError;
  let reason: string;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    error = new CovenantError('RequestHeaderTooLarge', 'the request headers exceed the limit', 431);
    reason = 'Request Header Fields Too Large';
  } else if (err.code === 'HPE_PAUSED') {
    // Node stopped parsing a connection whose answers piled up unread, and its TLS layer handed
    // the parser more of what it had already decrypted: the client pipelined faster than it reads.
    error = new CovenantError('TooManyPipelinedRequests', 'this connection sent requests faster than it read their answers: send the next once one is answered', 503);
    reason = 'Service Unavailable';
  } else if (err.code === 'HPE_INVALID_VERSION') {
    error = new CovenantError('HttpVersionNotSupported', 'the request names an HTTP version this node does not speak: send HTTP/1.1', 505);
    reason = 'HTTP Version Not Supported';
  } else {
    error = new CovenantError('MalformedRequest', `the request is not valid HTTP/1.1 (${err.code ?? 'parse error'})`, 400);
    reason = 'Bad Request';
  }
  const text = JSON.stringify(error.toBody());
  return `HTTP/1.1 ${error.status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`;
}

/** Host headers in a request's raw header list (name, value, name, value, ...). */
function hostHeaderCount(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') count++;
  }
  return count;
}
