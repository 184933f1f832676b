// `meshctl x ca client-cert` (ours; istioctl gets its credentials from the cluster): a client certificate
// signed by the daemon's CA, read from its CA directory, written as the key.pem / cert-chain.pem /
// root-cert.pem directory that --cert-dir takes, so a remote operator can use the debug types over :15012.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { CommandError, flagNumber, flagString, type Handler } from '../cli/context';
import { issueClientCertificate, loadCaDirectory } from '../ca/offline';
import { spiffeUri } from '../lib/spiffe';

/** meshConfig.trustDomain of the daemon's mesh config file; Istio's default `cluster.local` without one. */
function trustDomainOf(file: string): string {
  if (file === '') return 'cluster.local';
  let doc: { trustDomain?: unknown } | null;
  try {
    doc = parseYaml(readFileSync(file, 'utf8')) as typeof doc;
  } catch (e) {
    throw new CommandError(`--meshConfigFile ${file}: ${(e as Error).message.split('\n')[0]}`);
  }
  return typeof doc?.trustDomain === 'string' && doc.trustDomain !== '' ? doc.trustDomain : 'cluster.local';
}

export const clientCert: Handler = async (ctx) => {
  const caDir = flagString(ctx, 'ca-dir');
  const out = flagString(ctx, 'output');
  if (caDir === '') throw new CommandError("expecting --ca-dir: the discovery daemon's CA directory (./var/lib/mesh/ca under its working directory)");
  if (out === '') throw new CommandError('expecting an output directory (-o)');
  const namespace = flagString(ctx, 'namespace') || flagString(ctx, 'meshNamespace') || 'mesh-system';
  const sa = flagString(ctx, 'serviceAccount');
  if (sa === '') throw new CommandError('expecting a service account (--serviceAccount)');
  const ttlMs = flagNumber(ctx, 'ttl');
  if (!(ttlMs > 0)) throw new CommandError(`--ttl must be positive, got ${ttlMs / 1000}s`);
  const identity = spiffeUri(trustDomainOf(flagString(ctx, 'meshConfigFile')), namespace, sa);

  let cert;
  try {
    cert = await issueClientCertificate(loadCaDirectory(caDir), [identity], ttlMs);
  } catch (e) {
    throw new CommandError(`--ca-dir ${(e as Error).message}`);
  }
  try {
    mkdirSync(out, { recursive: true, mode: 0o700 });
    writeFileSync(path.join(out, 'key.pem'), cert.keyPem, { mode: 0o600 });
    writeFileSync(path.join(out, 'cert-chain.pem'), cert.certChainPem, { mode: 0o644 });
    writeFileSync(path.join(out, 'root-cert.pem'), cert.rootCertPem, { mode: 0o644 });
  } catch (e) {
    throw new CommandError(`${out}: ${(e as Error).message}`);
  }
  ctx.stdout.write(`A client certificate for ${identity} (valid ${ttlMs / 3_600_000} h) is in ${out}: use it with --cert-dir ${out}\n`);
  return 0;
};
