// `pilot-agent request <method> <path> [<body>]`: an HTTP request to one of the proxy's or agent's local
// ports (Istio's app/request.go). Only the admin (15000), agent status (15020), health (15021) and debug
// (15004) ports are allowed. The response body is printed as it is (meshctl reads it as JSON, so nothing
// else may be printed); 404 is printed like a success, any other status above 399 is an error.
import { CommandError, type Handler } from '../cli/context';
import { httpCall } from './http-client';

export const ALLOWED_PORTS: readonly number[] = [15000, 15004, 15020, 15021];
const TIMEOUT_MS = 60_000;

/** Where a port's requests go; tests map the fixed ports to ephemeral ones. */
export type PortAddress = (port: number) => string;
export const LOCALHOST: PortAddress = (port) => `localhost:${port}`;

export function makeRequestHandler(address: PortAddress): Handler {
  return async (ctx) => {
    const port = ctx.flags['debug-port'] as number;
    if (!ALLOWED_PORTS.includes(port)) {
      throw new CommandError(`debug port ${port} is not in allowed list [${ALLOWED_PORTS.join(' ')}]`);
    }
    const [method = '', rawPath = '', body = ''] = ctx.args;
    const url = `http://${address(port)}/${rawPath.replace(/^\//, '')}`;
    let r;
    try {
      r = await httpCall(url, { method, body, timeoutMs: TIMEOUT_MS });
    } catch (e) {
      throw new CommandError((e as Error).message);
    }
    if (r.status > 399 && r.status !== 404) throw new CommandError(`received unsuccessful status code ${r.status}: ${r.body}`);
    ctx.stdout.write(r.body + '\n');
    return 0;
  };
}

export const run: Handler = makeRequestHandler(LOCALHOST);
