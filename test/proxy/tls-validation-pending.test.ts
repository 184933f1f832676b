// A client TLS context whose validation context comes over SDS (src/proxy/tls/context.ts) and whose secret has
// not arrived must not trust any server: Envoy never uses a context before its secret is there (the cluster stays
// warming), so the engine, which may start connecting once the initial fetch timed out, fails the check rather
// than skipping it. Seen when a DestinationRule credentialName's CA had not reached the gateway yet and an
// origination to a server with another CA went through.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { CommonTlsContextSchema } from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { LoggerRegistry } from '../../src/proxy/log';
import { StatsStore } from '../../src/proxy/stats/store';
import { TlsContext } from '../../src/proxy/tls/context';
import { SecretManager } from '../../src/proxy/tls/secrets';
import type { GrpcMux } from '../../src/proxy/xds/grpc-mux';
import { EC_P256_KEY } from '../helpers/openssl';
import { tempDir } from '../helpers/temp';

const dir = tempDir(t, 'mesh-tls-pending-');
execFileSync(
  'openssl',
  [
    'req',
    '-x509',
    ...EC_P256_KEY,
    '-keyout',
    path.join(dir, 'key.pem'),
    '-out',
    path.join(dir, 'cert.pem'),
    '-days',
    '1',
    '-subj',
    '/CN=server.example',
    '-addext',
    'subjectAltName=DNS:server.example',
  ],
  { stdio: 'ignore' },
);
const key = fs.readFileSync(path.join(dir, 'key.pem'));
const cert = fs.readFileSync(path.join(dir, 'cert.pem'));

/** An SDS source that never answers (the daemon has not sent the secret). */
const silentMux = { subscribe: () => ({ setNames: () => {}, cancel: () => {}, version: '' }), start: () => {} } as unknown as GrpcMux;

function clientContext(validation: 'sds' | 'combined'): TlsContext {
  const secrets = new SecretManager(() => ({ key: 'ads', mux: silentMux }), new LoggerRegistry().get('secret'), new StatsStore());
  const sds = {
    name: 'kubernetes://origin-cacert',
    sdsConfig: { configSourceSpecifier: { case: 'ads' as const, value: {} }, initialFetchTimeout: { seconds: 0n, nanos: 1_000_000 } },
  };
  const common = create(CommonTlsContextSchema, {
    validationContextType:
      validation === 'sds'
        ? { case: 'validationContextSdsSecretConfig', value: sds }
        : {
            case: 'combinedValidationContext',
            value: {
              defaultValidationContext: {
                matchTypedSubjectAltNames: [{ sanType: 2, matcher: { matchPattern: { case: 'exact', value: 'server.example' } } }],
              },
              validationContextSdsSecretConfig: sds,
            },
          },
  } as never);
  return new TlsContext(common, { role: 'client', sni: 'server.example' }, secrets, 'cluster origin');
}

async function handshake(ctx: TlsContext): Promise<{ error?: string }> {
  const server = tls.createServer({ key, cert }, (s) => s.end());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  const socket = tls.connect({ host: '127.0.0.1', port, servername: 'server.example', secureContext: ctx.secureContext(), ...ctx.secureOptions() });
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  const needs = ctx.needsPostHandshakeCheck();
  const v = needs ? ctx.verifyPeer(socket) : {};
  socket.destroy();
  return { ...(needs ? {} : { error: undefined }), ...v };
}

for (const kind of ['sds', 'combined'] as const) {
  t.test(`${kind} validation context, its secret not there: the server's certificate is not trusted`, async (t) => {
    const ctx = clientContext(kind);
    await ctx.ready; // the initial fetch (1 ms) timed out, as the engine would start using the cluster then
    t.ok(ctx.needsPostHandshakeCheck(), 'the handshake is checked after OpenSSL');
    const r = await handshake(ctx);
    t.match(r.error, /validation context secret has not arrived/, 'refused');
    ctx.release();
  });
}
