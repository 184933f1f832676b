// `pilot-discovery request <method> <path> [<body>]`: an HTTP request to the daemon's monitoring/debug
// interface on 127.0.0.1:15014, printing the response body. As in Istio's pilot/pkg/request, a 404 is printed
// like a success and any other status above 399 is an error carrying the body.
import * as http from 'node:http';
import { CommandError, type Handler } from '../cli/context';

/** Where Istio's request command sends its requests. */
export const MONITORING_ADDRESS = '127.0.0.1:15014';
const TIMEOUT_MS = 60_000;

/** Go's net/http error prefix for a method: `Get`, `Post`, `Put`. */
function urlErrorOp(method: string): string {
  return method.length ? method[0]!.toUpperCase() + method.slice(1).toLowerCase() : 'Get';
}

function netDetail(err: NodeJS.ErrnoException, address: string): string {
  switch (err.code) {
    case 'ECONNREFUSED':
      return `dial tcp ${address}: connect: connection refused (is pilot-discovery running with its monitoring port on ${address}?)`;
    case 'ECONNRESET':
      return `read tcp ${address}: connection reset by peer`;
    case 'ETIMEDOUT':
      return `dial tcp ${address}: i/o timeout`;
    default:
      return err.message;
  }
}

export interface RequestResult {
  status: number;
  body: string;
}

/** Sends one request to `address`; rejects with a CommandError on transport failures. */
export function sendRequest(address: string, method: string, path: string, body: string): Promise<RequestResult> {
  const url = `http://${address}/${path.replace(/^\//, '')}`;
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = http.request(url, {
        method,
        headers: body ? { 'Content-Length': Buffer.byteLength(body) } : {},
        timeout: TIMEOUT_MS,
        agent: false,
      });
    } catch (e) {
      reject(new CommandError(`net/http: invalid request ${method} ${url}: ${(e as Error).message}`));
      return;
    }
    req.on('timeout', () => req.destroy(Object.assign(new Error('Client.Timeout exceeded while awaiting headers'), { code: 'TIMEOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => {
      const detail = err.code === 'TIMEOUT' ? `context deadline exceeded (Client.Timeout exceeded while awaiting headers)` : netDetail(err, address);
      reject(new CommandError(`${urlErrorOp(method)} "${url}": ${detail}`));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (err) => reject(new CommandError(`${urlErrorOp(method)} "${url}": ${err.message}`)));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.end(body || undefined);
  });
}

/** The handler for a given address (the command uses MONITORING_ADDRESS; tests point it elsewhere). */
export function makeRequestHandler(address: string): Handler {
  return async (ctx) => {
    const [method = '', path = '', body = ''] = ctx.args;
    const r = await sendRequest(address, method, path, body);
    if (r.status > 399 && r.status !== 404) throw new CommandError(`received unsuccessful status code ${r.status}: ${r.body}`);
    ctx.stdout.write(r.body + '\n');
    return 0;
  };
}

export const run: Handler = makeRequestHandler(MONITORING_ADDRESS);
