// Workload identities for engine tests: a root and workload certificates from our CA (src/ca), served to
// engines by the agent's own SDS server (src/agent/identity/sds-server.ts) on a Unix socket, behind the
// `sds-grpc` static cluster every Istio bootstrap has.
import type { JsonObject } from '@bufbuild/protobuf';
import { CertificateAuthority } from '../../src/ca/authority';
import { createCsrPem } from '../../src/ca/pkix/csr';
import { generateKeyPair } from '../../src/ca/pkix/keys';
import { generateRoot, selfSignedBundle } from '../../src/ca/selfsigned';
import { SdsServer } from '../../src/agent/identity/sds-server';
import type { SecretItem, WorkloadSecrets } from '../../src/agent/identity/secrets';
import path from 'node:path';

const TD = 'cluster.local';
const HOUR = 3_600_000;

export interface Identity {
  id: string;
  certPem: string;
  keyPem: string;
}

export async function makeCa() {
  const root = await generateRoot({ ttlMs: 24 * HOUR, org: TD, rsaKeySize: 2048 });
  const ca = new CertificateAuthority(selfSignedBundle(root, 'test'), { defaultCertTtlMs: HOUR, maxCertTtlMs: 24 * HOUR });
  const issue = async (id: string): Promise<Identity> => {
    const pair = await generateKeyPair({ kind: 'ec', curve: 'P256' });
    const csr = createCsrPem({ privateKey: pair.privateKey, sans: { uris: [id] }, org: '' });
    return { id, certPem: ca.sign(csr, { subjectIds: [id], ttlSeconds: 0 }), keyPem: pair.privateKeyPem };
  };
  return { rootPem: root.certPem, issue };
}

/** The agent's SDS server over a Unix socket, serving `default` and `ROOTCA` for one workload. */
export async function startSds(dir: string, rootPem: string, id: Identity) {
  let current = id;
  const listeners = new Set<(name: string) => void>();
  const item = (name: string): SecretItem | undefined =>
    name === 'default'
      ? { name, certificateChain: Buffer.from(current.certPem), privateKey: Buffer.from(current.keyPem) }
      : name === 'ROOTCA'
        ? { name, rootCert: Buffer.from(rootPem) }
        : undefined;
  // the secrets store side of the agent, reduced to what the SDS server reads
  const store = {
    serves: (name: string) => name === 'default' || name === 'ROOTCA',
    get: item,
    whenAvailable: async (name: string) => item(name)!,
    onUpdate: (cb: (name: string) => void) => {
      listeners.add(cb);
      return () => listeners.delete(cb);
    },
  };
  const socketPath = path.join(dir, 'sds', 'socket');
  const server = new SdsServer(socketPath, store as unknown as WorkloadSecrets);
  await server.start();
  return {
    socketPath,
    rotate(next: Identity) {
      current = next;
      for (const l of listeners) l('default');
    },
    stop: () => server.stop(),
  };
}

/** Istio's `sds-grpc` bootstrap cluster: HTTP/2 to the agent's SDS socket. */
export function sdsCluster(socketPath: string): JsonObject {
  return {
    name: 'sds-grpc',
    type: 'STATIC',
    connect_timeout: '1s',
    load_assignment: { cluster_name: 'sds-grpc', endpoints: [{ lb_endpoints: [{ endpoint: { address: { pipe: { path: socketPath } } } }] }] },
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        explicit_http_config: { http2_protocol_options: {} },
      },
    },
  };
}
