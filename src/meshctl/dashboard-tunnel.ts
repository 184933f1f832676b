// The pod port-forward through the API server that `meshctl dashboard` uses with a cluster, as istioctl 1.26's
// kube.PortForwarder (client-go portforward over SPDY, falling back to WebSocket): here the WebSocket form of
// the `pods/<name>/portforward?ports=<port>` subresource with the `v4.channel.k8s.io` subprotocol (Kubernetes'
// pkg/kubelet/cri/streaming/portforward/websocket.go): each binary message starts with its channel (0 data,
// 1 error), and the first message of each channel carries the port as two little-endian bytes. istioctl opens
// the stream when the forwarder starts; `probe` does the same (one upgrade, then closed), so a refusal is told
// before the URL is printed. Each local connection then gets a stream of its own, as client-go's do.
import type { IncomingMessage } from 'node:http';
import type net from 'node:net';
import type { OrchClient } from '../config/orch/client';

export interface PodPort {
  namespace: string;
  pod: string;
  port: number;
}

function forwardUrl(client: OrchClient, p: PodPort): string {
  const path = `/api/v1/namespaces/${encodeURIComponent(p.namespace)}/pods/${encodeURIComponent(p.pod)}/portforward?ports=${p.port}`;
  return client.server.replace(/^http/, 'ws') + path;
}

/** The API server's Status message in a refused upgrade's body, else the body's first line. */
export function refusalText(status: number, body: string): string {
  let message = body.trim().split('\n')[0] ?? '';
  try {
    const s = JSON.parse(body) as { message?: string };
    if (s.message) message = s.message;
  } catch {
    /* not a Status */
  }
  return `error upgrading connection: ${status}${message ? `: ${message}` : ''}`;
}

/** The part of ws's WebSocket used here (ws, client-node's own WebSocket library, ships no types). */
interface Ws {
  binaryType: string;
  once(event: 'open', f: () => void): void;
  once(event: 'unexpected-response', f: (req: unknown, res: IncomingMessage) => void): void;
  once(event: 'error', f: (e: Error) => void): void;
  on(event: 'message', f: (data: Buffer) => void): void;
  on(event: 'close', f: () => void): void;
  on(event: 'error', f: (e: Error) => void): void;
  send(data: Buffer): void;
  close(): void;
  terminate(): void;
}
type WsConstructor = new (url: string, protocols: string[], options: Record<string, unknown>) => Ws;

async function open(client: OrchClient, p: PodPort): Promise<Ws> {
  // @ts-expect-error: ws ships no type declarations (see Ws above)
  const { WebSocket } = (await import('ws')) as { WebSocket: WsConstructor };
  const opts: Record<string, unknown> = {};
  await client.kubeConfig.applyToHTTPSOptions(opts);
  const ws = new WebSocket(forwardUrl(client, p), ['v4.channel.k8s.io'], opts);
  ws.binaryType = 'nodebuffer';
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => reject(new Error(refusalText(res.statusCode ?? 0, body))));
      res.on('error', (e) => reject(e));
    });
    ws.once('error', (e) => reject(new Error(`error upgrading connection: ${e.message}`)));
  });
}

/** Opens one stream and closes it: the API server and the kubelet behind it accept the forward. */
export async function probe(client: OrchClient, p: PodPort): Promise<void> {
  const ws = await open(client, p);
  ws.close();
}

/** Pipes a local connection through a stream of its own to the pod's port. */
export function tunnel(client: OrchClient, p: PodPort, local: net.Socket, onError: (message: string) => void): void {
  local.pause();
  open(client, p).then(
    (ws) => {
      const seen = [false, false];
      ws.on('message', (data: Buffer) => {
        const channel = data[0]!;
        let payload = data.subarray(1);
        if (channel > 1) return;
        if (!seen[channel]) {
          seen[channel] = true;
          payload = payload.subarray(2); // the port, once per channel
        }
        if (channel === 0) local.write(payload);
        else if (payload.length) onError(`error forwarding port ${p.port} to pod ${p.pod}: ${payload.toString().trim()}`);
      });
      ws.on('close', () => local.end());
      ws.on('error', () => local.destroy());
      local.on('data', (d: Buffer) => ws.send(Buffer.concat([Buffer.from([0]), d])));
      local.on('end', () => ws.close());
      local.on('error', () => ws.terminate());
      local.on('close', () => ws.terminate());
      local.resume();
    },
    (e: Error) => {
      onError(e.message);
      local.destroy();
    },
  );
}
