// A certificate service made of OpenSSL (`openssl ca`), for agent tests that need a CA that can be stopped,
// slowed or made to fail at will, independent of the code under test: IstioCertificateService/
// CreateCertificate over TLS on loopback, signing each CSR as it is (its SAN copied) for the requested TTL,
// recording the metadata of every call. The daemon's real CA is exercised by the end-to-end tests.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import type { Test } from 'tap';
import { IstioCertificateResponseSchema, IstioCertificateService } from '../../src/gen/security/v1alpha1/ca_pb';
import { addGrpcService } from '../../src/lib/xds/grpc';
import { tempDir } from './temp';
import { signWith } from './openssl';

export interface CaCall {
  csr: string;
  ttlSeconds: number;
  metadata: Record<string, string>;
  certSigner: unknown;
}

export interface CaDouble {
  address: string;
  port: number;
  dir: string;
  /** The root's PEM file. */
  rootPath: string;
  /** The name in the double's server certificate. */
  serverName: string;
  calls: CaCall[];
  /** Make calls fail with this status until cleared. */
  failWith(code: grpc.status | undefined): void;
  stop(): Promise<void>;
  /** Starts again on the same port (after stop). */
  restart(): Promise<void>;
}

function openssl(args: string[], cwd: string): string {
  return execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}

function stamp(d: Date): string {
  return d
    .toISOString()
    .replace(/[-:T]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

const CONFIG = `[ ca ]
default_ca = CA_default
[ CA_default ]
dir = .
database = ./index.txt
new_certs_dir = ./newcerts
serial = ./serial
certificate = ./root.pem
private_key = ./root.key
default_md = sha256
policy = policy_any
copy_extensions = copy
unique_subject = no
email_in_dn = no
[ policy_any ]
organizationName = optional
commonName = optional
`;

export async function startCaDouble(t: Test, o: { serverName?: string; port?: number } = {}): Promise<CaDouble> {
  const dir = tempDir(t, 'mesh-ca-double-');
  const serverName = o.serverName ?? 'meshd.mesh-system.svc';
  fs.mkdirSync(path.join(dir, 'newcerts'));
  fs.writeFileSync(path.join(dir, 'index.txt'), '');
  fs.writeFileSync(path.join(dir, 'serial'), '1000\n');
  fs.writeFileSync(path.join(dir, 'ca.cnf'), CONFIG);
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'root.key',
      '-out',
      'root.pem',
      '-days',
      '30',
      '-subj',
      '/O=ca-double.test',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  openssl(
    [
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      '/O=ca-double.test',
      '-addext',
      `subjectAltName=DNS:${serverName}`,
    ],
    dir,
  );
  openssl([...signWith('server.csr', 'root.pem', 'root.key'), '-days', '30', '-out', 'server.pem', '-copy_extensions', 'copy'], dir);

  const calls: CaCall[] = [];
  let failure: grpc.status | undefined;
  let serial = 0;
  // `openssl ca` keeps a database: one signature at a time.
  let queue: Promise<unknown> = Promise.resolve();
  const sign = (csr: string, ttlSeconds: number): Promise<string> => {
    const run = queue.then(() => {
      const n = ++serial;
      fs.writeFileSync(path.join(dir, `req-${n}.csr`), csr);
      const now = new Date(Date.now() - 1000);
      openssl(
        [
          'ca',
          '-batch',
          '-config',
          'ca.cnf',
          '-in',
          `req-${n}.csr`,
          '-out',
          `cert-${n}.pem`,
          '-notext',
          '-startdate',
          stamp(now),
          '-enddate',
          stamp(new Date(now.getTime() + 1000 + ttlSeconds * 1000)),
        ],
        dir,
      );
      return fs.readFileSync(path.join(dir, `cert-${n}.pem`), 'utf8');
    });
    queue = run.catch(() => undefined);
    return run;
  };

  let server: grpc.Server | undefined;
  let port = o.port ?? 0;
  const start = async () => {
    const s = new grpc.Server();
    addGrpcService(s, IstioCertificateService, {
      createCertificate: (call, callback) => {
        const md: Record<string, string> = {};
        for (const [k, v] of Object.entries(call.metadata.getMap())) md[k] = String(v);
        calls.push({
          csr: call.request.csr,
          ttlSeconds: Number(call.request.validityDuration),
          metadata: md,
          certSigner: call.request.metadata?.['CertSigner'],
        });
        if (failure !== undefined) {
          callback({ code: failure, details: 'the CA double was told to fail' });
          return;
        }
        sign(call.request.csr, Number(call.request.validityDuration) || 3600).then(
          (leaf) =>
            callback(null, create(IstioCertificateResponseSchema, { certChain: [leaf, fs.readFileSync(path.join(dir, 'root.pem'), 'utf8')] })),
          (e: Error) => callback({ code: grpc.status.INVALID_ARGUMENT, details: e.message }),
        );
      },
    });
    const creds = grpc.ServerCredentials.createSsl(
      null,
      [{ cert_chain: fs.readFileSync(path.join(dir, 'server.pem')), private_key: fs.readFileSync(path.join(dir, 'server.key')) }],
      false,
    );
    port = await new Promise<number>((resolve, reject) => s.bindAsync(`127.0.0.1:${port}`, creds, (err, p) => (err ? reject(err) : resolve(p))));
    server = s;
  };
  await start();
  const double: CaDouble = {
    get address() {
      return `127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    dir,
    rootPath: path.join(dir, 'root.pem'),
    serverName,
    calls,
    failWith: (code) => (failure = code),
    stop: async () => {
      const s = server;
      server = undefined;
      s?.forceShutdown();
    },
    restart: start,
  };
  t.teardown(() => double.stop());
  return double;
}
