// What meshctl says when the orchestrator API server or the daemon cannot be used: one line naming the
// address and what went wrong, in words. kubectl/istioctl (client-go) print `dial tcp …: connect: connection
// refused`, `Unauthorized` or `… is forbidden: User … cannot …`; we keep their facts and add the address and
// the configuration they came from, and we never let a library's stack or OpenSSL's record-layer text through.
import { CommandError } from '../cli/context';

/** An orchestrator API failure turned into a one-line CommandError; keeps the HTTP status for callers. */
export class OrchAccessError extends CommandError {
  constructor(
    message: string,
    readonly statusCode: number | undefined,
  ) {
    super(message);
  }
}

interface Cause {
  code?: string;
  message?: string;
  errors?: Cause[];
  cause?: Cause;
}

/** The innermost cause with a code: undici wraps the socket error in `TypeError: fetch failed`. */
function rootCause(e: unknown): Cause {
  let c = e as Cause;
  for (let i = 0; i < 5 && c; i++) {
    if (c.code && !c.code.startsWith('UND_ERR_') && c.code !== 'ERR_INVALID_STATE') return c;
    if (c.cause) c = c.cause;
    else if (Array.isArray(c.errors) && c.errors.length > 0) c = c.errors[0]!;
    else return c;
  }
  return c ?? {};
}

const TLS_TRUST = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
]);

/** OpenSSL's words when a TLS client hears plain text (or the reverse). */
const PLAINTEXT_PEER = /wrong version number|packet length too long|unknown protocol|record layer failure|http request/i;

/** Why a connection failed, in words, from a Node/undici/OpenSSL error or gRPC's details text. */
export function connectionFailure(e: unknown): string {
  const c = rootCause(e);
  const code = c.code ?? '';
  const msg = String(c.message ?? e ?? '');
  if (code === 'ECONNREFUSED' || /ECONNREFUSED/.test(msg)) return 'connection refused (nothing listens there)';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || /ENOTFOUND|EAI_AGAIN/.test(msg)) return 'no such host';
  if (code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || /ETIMEDOUT/.test(msg)) return 'timed out connecting';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'no route to the host';
  if (code === 'ECONNRESET' || /ECONNRESET|socket hang up/.test(msg)) return 'the server closed the connection';
  if (TLS_TRUST.has(code)) return `its TLS certificate is not trusted by the configured certificate authority (${code})`;
  if (code === 'CERT_HAS_EXPIRED') return 'its TLS certificate has expired';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `its TLS certificate does not name this address: ${msg.split('\n')[0]}`;
  if (PLAINTEXT_PEER.test(msg) || code === 'ERR_SSL_WRONG_VERSION_NUMBER')
    return 'it answered the TLS handshake in plain text: it does not speak TLS on that port';
  return msg.split('\n')[0]!.replace(/^(TypeError|Error): /, '') || 'unknown error';
}

/** The Status `message` of an OrchApiError (`GET /api/v1/x: 403 Forbidden: <message>`). */
function statusMessage(e: { message: string; reason?: string }): string {
  const m = /^[A-Z]+ \S+: \d+(?: \w+)?: (.*)$/s.exec(e.message);
  return (m ? m[1]! : e.message).split('\n')[0]!;
}

/**
 * The one-line error for a failed orchestrator request, or undefined when the request reached the API
 * server and was answered with something its caller handles (404, 409…).
 */
export function describeOrchFailure(server: string, origin: string, e: unknown): OrchAccessError | undefined {
  if (e instanceof CommandError) return undefined;
  const status = (e as { statusCode?: unknown }).statusCode;
  if (typeof status !== 'number') {
    if ((e as Error)?.name === 'AbortError') return undefined;
    return new OrchAccessError(`cannot reach the orchestrator API server ${server} (${origin}): ${connectionFailure(e)}`, undefined);
  }
  const err = e as { message: string; reason?: string };
  if (status === 401)
    return new OrchAccessError(`the orchestrator API server ${server} refused the credentials of ${origin} (401 Unauthorized)`, 401);
  if (status === 403)
    return new OrchAccessError(`the orchestrator API server ${server} denied permission (403 Forbidden): ${statusMessage(err)}`, 403);
  if (status === 400 && /HTTP request to an HTTPS server/i.test(err.message))
    return new OrchAccessError(`the orchestrator API server ${server} speaks TLS: its address in ${origin} must start with https://`, 400);
  if (status === 429 || status >= 500)
    return new OrchAccessError(`the orchestrator API server ${server} failed: ${err.message.split('\n')[0]}`, status);
  return undefined;
}

/** gRPC's UNAVAILABLE details (`No connection established. Last error: …`) as one line in words. */
export function describeDialFailure(address: string, details: string, tls: boolean): string {
  const m = /Last error: (?:Error: )?(.*?)\.?\s*(?:Resolution note:.*)?$/s.exec(details);
  const last = (m ? m[1]! : details).trim();
  if (tls && PLAINTEXT_PEER.test(last))
    return `could not dial ${address}: it answered the TLS handshake in plain text: it is a plaintext port (such as the daemon's --grpcAddr :15010); give --plaintext, or point --xds-address at the TLS port (:15012)`;
  if (!tls && /Protocol error|Connection dropped|ECONNRESET|socket hang up|premature close/i.test(last))
    return `could not dial ${address}: it closed a plaintext connection: it may be a TLS port (such as the daemon's :15012); drop --plaintext`;
  return `could not dial ${address}: ${connectionFailure({ message: last, code: /\b(E[A-Z]+)\b/.exec(last)?.[1] })}`;
}

/**
 * Node warns (DEP0123) when a TLS client names an IP address as SNI; grpc-js always passes the target host
 * as the server name, and meshctl dials daemons by IP. The warning is for library authors: drop that one.
 */
export function silenceIpServerNameWarning(): void {
  const proc = process as NodeJS.Process & { __meshIpSni?: boolean };
  if (proc.__meshIpSni) return;
  proc.__meshIpSni = true;
  const emit = process.emitWarning.bind(process) as (...a: unknown[]) => void;
  process.emitWarning = ((warning: unknown, ...rest: unknown[]) => {
    const opt = rest[0];
    const code = typeof opt === 'object' && opt !== null ? (opt as { code?: string }).code : rest[1];
    if (code === 'DEP0123') return;
    emit(warning, ...rest);
  }) as typeof process.emitWarning;
}

/** The one-line text for a failed request to the API server at `server` (an answer the caller handles keeps its message). */
export function orchErrorText(e: unknown, server: string): string {
  return describeOrchFailure(server, 'the client configuration', e)?.message ?? (e as Error)?.message ?? String(e);
}
