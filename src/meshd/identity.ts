// The daemon's identity wiring (Istio's maybeCreateCA, initIstiodCerts, the authenticator list and RunCA):
// the CA, the certificate :15012 and :15017 serve when the operator brings none, the CA bundle, the
// authenticator chain shared by the CA service and secured xDS, and the CA service itself.
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import type * as grpc from '@grpc/grpc-js';
import { CommandError, type RunContext } from '../cli/context';
import type { EnvTable } from '../lib/env';
import type { OrchClient } from '../config/orch';
import { daemonOrchClient } from './orchestrator';
import { ClientCertAuthenticator } from '../ca/authn/client-cert';
import { DaemonTokenAuthenticator } from '../ca/authn/daemon-token';
import { JwtAuthenticator, JwtRuleError, parseJwtRule } from '../ca/authn/jwt';
import { NodeAuthorizer, parseTrustedNodeAccounts } from '../ca/authn/node-authorizer';
import { OrchTokenAuthenticator } from '../ca/authn/orch-token';
import { type AuthGate, type Authenticator, authenticateAny } from '../ca/authn/types';
import type { IncomingMessage } from 'node:http';
import { TLSSocket } from 'node:tls';
import { XfccAuthenticator } from '../ca/authn/xfcc';
import type { KeyCertBundle } from '../ca/bundle';
import { FileRootPublisher, RootPublication } from '../ca/publish';
import { CaStartError, MeshCa } from '../ca/runtime';
import { caIssuer, registerCaService } from '../ca/server';
import { orchServingCertificate } from '../ca/orch-csr';
import { EXTERNAL_CA_ORCH, EXTERNAL_CA_ROOT_FILE, OrchRegistrationAuthority, readExternalRoot } from '../ca/ra';
import { caSettingsFromEnv, type CaSettings, daemonDnsNames } from '../ca/settings';
import { DEFAULT_CA_DIR, FileCaStore, SecretCaStore } from '../ca/store';
import { TOKEN_KEY_FILE, tokenSigningKey, TokenKeyError } from '../ca/token';
import { registerScope } from '../lib/log';
import type { IdentityProvider } from './providers';
import { MutableTlsSource, type TlsMaterial, type TlsSource } from '../serve/tls';
import { joinHostPort } from '../lib/hostport';

const log = registerScope('security', 'daemon identity');

/** Istio's third-party token path (./var/run/secrets/tokens/istio-token), renamed. */
export const THIRD_PARTY_JWT_PATH = './var/run/secrets/tokens/mesh-token';
/** Istio's default discovery address (meshConfig.defaultConfig.discoveryAddress), renamed. */
const DEFAULT_DISCOVERY_ADDRESS = 'meshd.mesh-system.svc:15012';

export interface MeshFacts {
  trustDomain: string;
  discoveryHost: string;
}

/** The mesh config fields the identity needs: trustDomain and defaultConfig.discoveryAddress. */
export function meshFacts(file: string): MeshFacts {
  let doc: { trustDomain?: unknown; defaultConfig?: { discoveryAddress?: unknown } } = {};
  let text: string | undefined;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    // No file: Istio's built-in default mesh.
  }
  if (text !== undefined) {
    try {
      doc = (parseYaml(text) as typeof doc) ?? {};
    } catch (e) {
      throw new CommandError(`--meshConfig ${file}: failed to unmarshal mesh config: ${(e as Error).message}`);
    }
  }
  const trustDomain = typeof doc.trustDomain === 'string' && doc.trustDomain !== '' ? doc.trustDomain : 'cluster.local';
  const address = typeof doc.defaultConfig?.discoveryAddress === 'string' ? doc.defaultConfig.discoveryAddress : DEFAULT_DISCOVERY_ADDRESS;
  return { trustDomain, discoveryHost: address.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1') };
}

/** iss and aud[0] of the daemon's own token, when it has one (Istio's detectAuthEnv). */
function ownTokenClaims(): { iss?: string; aud?: string } {
  let token: string;
  try {
    token = fs.readFileSync(THIRD_PARTY_JWT_PATH, 'utf8').trim();
  } catch {
    return {};
  }
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { iss?: unknown; aud?: unknown };
    const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
    return { iss: typeof payload.iss === 'string' ? payload.iss : undefined, aud: typeof aud === 'string' ? aud : undefined };
  } catch (e) {
    log.warn(`Starting with invalid orchestrator JWT token ${THIRD_PARTY_JWT_PATH}: ${(e as Error).message}`);
    return {};
  }
}

export interface DaemonIdentity extends IdentityProvider {
  readonly settings: CaSettings;
  readonly ca?: MeshCa;
  /** The chain in Istio's order, shared with secured xDS. */
  readonly authenticators: readonly Authenticator[];
  readonly gate: AuthGate;
  readonly trustDomain: string;
  /** Istio's debug-endpoint authentication for callers not on loopback: the chain, ungated. */
  authenticateDebug(req: IncomingMessage): Promise<readonly string[] | undefined>;
  /**
   * The roots the daemon's certificates chain to (Istio's CA bundle watcher): published in every namespace
   * and patched into the webhook configurations. Undefined without a CA.
   */
  caBundle(): string | undefined;
  /** Called with the new bundle whenever it changes (root rotation, plugged-in certificates reloaded). */
  onCaBundleChange(fn: (pem: string) => void): () => void;
  close(): Promise<void>;
}

export interface IdentityOptions {
  ctx: RunContext;
  env: EnvTable;
  /** The daemon has an orchestrator client configuration. */
  orchestrator: boolean;
}

export async function startIdentity(o: IdentityOptions): Promise<DaemonIdentity> {
  const { ctx, env } = o;
  const settings = caSettingsFromEnv(ctx.env);
  const namespace = ctx.flags['namespace'] as string;
  const facts = meshFacts(ctx.flags['meshConfig'] as string);
  const inCluster = Boolean(ctx.env['ORCH_SERVICE_HOST'] ?? ctx.env['KUBERNETES_SERVICE_HOST']);

  const ra = settings.externalCa !== '';
  if (ra && settings.externalCa !== EXTERNAL_CA_ORCH) {
    throw new CommandError(`EXTERNAL_CA=${settings.externalCa}: invalid CA name; the registration authority mesh has is ${EXTERNAL_CA_ORCH}`);
  }
  if (settings.certProvider === 'kubernetes') throw new CommandError('PILOT_CERT_PROVIDER=kubernetes is no longer supported by upstream Kubernetes');
  // PILOT_CERT_PROVIDER=k8s.io/<signerName>: the serving certificate from that signer of the certificate API.
  const servingSigner = settings.certProvider.startsWith('k8s.io/') ? settings.certProvider.slice('k8s.io/'.length) : undefined;
  if (servingSigner === '') throw new CommandError('PILOT_CERT_PROVIDER=k8s.io/ names no signer: give k8s.io/<signerName>');
  if ((ra || servingSigner !== undefined) && !o.orchestrator) {
    throw new CommandError(
      `${ra ? `EXTERNAL_CA=${settings.externalCa}` : `PILOT_CERT_PROVIDER=${settings.certProvider}`} signs through the orchestrator's certificate API: give --orchconfig or run inside a cluster`,
    );
  }
  if (ra && settings.orchSigner === '') {
    throw new CommandError(`EXTERNAL_CA=${EXTERNAL_CA_ORCH} needs ORCH_SIGNER: the signerName of the signer that issues workload certificates`);
  }

  let orch: OrchClient | undefined;
  if (o.orchestrator) {
    try {
      orch = await daemonOrchClient(ctx, env);
    } catch (e) {
      throw new CommandError((e as Error).message);
    }
  }

  let meshCa: MeshCa | undefined;
  let registrationAuthority: OrchRegistrationAuthority | undefined;
  if (settings.enabled && ra) {
    registrationAuthority = new OrchRegistrationAuthority({
      api: orch!,
      signer: settings.orchSigner,
      signerDomain: settings.certSignerDomain,
      defaultCertTtlMs: settings.defaultWorkloadCertTtlMs,
      maxCertTtlMs: settings.maxWorkloadCertTtlMs,
      rootCertFile: path.resolve(EXTERNAL_CA_ROOT_FILE),
    });
    log.info(`registration authority: workload certificates are signed by ${settings.orchSigner} through the orchestrator's certificate API`);
  } else if (!settings.enabled) {
    log.info('ENABLE_CA_SERVER is false: no CA, no CA service; the secure listeners need --tlsCertFile/--tlsKeyFile');
  } else {
    const store = orch ? new SecretCaStore(orch, namespace, settings.useCacertsForSelfSigned) : new FileCaStore();
    try {
      meshCa = await MeshCa.start({ settings, trustDomain: facts.trustDomain, store });
    } catch (e) {
      orch?.close();
      if (e instanceof CaStartError) throw new CommandError(e.message);
      throw new CommandError(`failed to create CA: ${(e as Error).message}`);
    }
    log.info(`CA (${meshCa.kind}) signing with the root in ${meshCa.source}`);
  }

  // Istio's order: client certificate, JWT_RULE, (the daemon's own tokens,) orchestrator token, XFCC; the
  // first that yields identities wins.
  const authenticators: Authenticator[] = [new ClientCertAuthenticator()];
  const trustDomain = () => facts.trustDomain;
  if (settings.jwtRule !== '') {
    try {
      const rule = parseJwtRule(settings.jwtRule);
      if (rule.audiences.length === 0) log.warn('JWT_RULE has no "audiences": every token will be refused (invalid audiences)');
      authenticators.push(await JwtAuthenticator.create(rule, trustDomain));
      log.info(`authenticating with JWT_RULE: issuer ${rule.issuer}, audiences [${rule.audiences.join(' ')}]`);
    } catch (e) {
      meshCa?.close();
      orch?.close();
      if (e instanceof JwtRuleError) throw new CommandError(`error initializing OIDC: ${e.message}`);
      throw e;
    }
  }
  if (meshCa) {
    // The daemon's own tokens (meshctl x workload entry configure --ca-dir): the key lives beside the signing
    // material. With no cluster it is made at first start beside the self-signed root; a plug-in CA's
    // ROOT_CA_DIR (the operator's, perhaps read-only) and a cluster's daemon only trust one an operator put
    // there (meshctl --ca-dir makes it). Checked before the orchestrator's TokenReview, a round trip.
    const caDir = path.resolve(meshCa.kind === 'plug-in' ? settings.rootCaDir : DEFAULT_CA_DIR);
    try {
      if (tokenSigningKey(caDir, !orch && meshCa.kind === 'self-signed')) log.info(`trusting workload tokens signed by ${path.join(caDir, TOKEN_KEY_FILE)} (audiences [${settings.tokenAudiences.join(' ')}])`);
      authenticators.push(new DaemonTokenAuthenticator({ dir: caDir, audiences: settings.tokenAudiences, trustDomain }));
    } catch (e) {
      meshCa.close();
      orch?.close();
      if (e instanceof TokenKeyError) throw new CommandError(e.message);
      throw e;
    }
  }
  if (orch) {
    authenticators.push(
      new OrchTokenAuthenticator({
        api: orch,
        audiences: settings.tokenAudiences,
        clusterId: ctx.flags['clusterID'] as string,
        clusterAliases: ctx.flags['clusterAliases'] as Record<string, string>,
        trustDomain,
      }),
    );
  }
  if (settings.trustedGatewayCidrs.length > 0) authenticators.push(new XfccAuthenticator(settings.trustedGatewayCidrs));
  if (meshCa) {
    // RunCA: outside a cluster, tokens of TOKEN_ISSUER (or of the issuer of the daemon's own token) are
    // checked by OIDC discovery.
    const own = ownTokenClaims();
    const issuer = settings.tokenIssuer || own.iss || '';
    const audience = settings.audience || own.aud || '';
    if (issuer !== '' && !inCluster) {
      try {
        authenticators.push(await JwtAuthenticator.create({ issuer, audiences: [audience] }, trustDomain));
        log.info('Using out-of-cluster JWT authentication');
      } catch (e) {
        log.info(`the token issuer ${issuer} does not support OIDC discovery (${(e as Error).message}); using only in-cluster auth`);
      }
    }
  }

  let nodeAuthorizer: NodeAuthorizer | undefined;
  const trusted = parseTrustedNodeAccounts(settings.trustedNodeAccounts);
  for (const bad of trusted.invalid) log.warn(`Invalid CA_TRUSTED_NODE_ACCOUNTS, ignoring: ${bad}`);
  if (trusted.accounts.size > 0) {
    if (orch) nodeAuthorizer = new NodeAuthorizer(orch, trusted.accounts);
    else log.warn('CA_TRUSTED_NODE_ACCOUNTS is set but there is no orchestrator to check which pods run on a node: impersonation is refused');
  }

  const gate: AuthGate = { xdsAuth: settings.xdsAuth, xdsAuthPlaintext: settings.xdsAuthPlaintext };

  // Roots: with no cluster, published in the file agents read; in a cluster the namespace controller
  // (leader only) writes them into every namespace from caBundle() below. Either way they are followed by
  // the listeners that verify client certificates.
  const publication = new RootPublication(orch ? [] : [new FileRootPublisher()]);
  if (meshCa) await publication.publish(meshCa.ca.bundle.rootCertPem);
  // The external CA's root, as the operator mounted it (Istio's ./etc/external-ca-cert).
  let externalRoot = registrationAuthority?.mountedRoot() ?? '';
  if (externalRoot !== '') await publication.publish(externalRoot);
  const bundleListeners = new Set<(pem: string) => void>();

  // The serving certificate (PILOT_CERT_PROVIDER=istiod), re-issued whenever the CA's material changes.
  const dnsNames = daemonDnsNames({ namespace, discoveryHost: facts.discoveryHost, customHosts: settings.customHosts, revision: ctx.env['REVISION'] });
  let serving: MutableTlsSource | undefined;
  let noTlsReason: string | undefined;
  const rootsBuffer = () => (meshCa ? Buffer.from(meshCa.ca.bundle.rootCertPem) : externalRoot !== '' ? Buffer.from(externalRoot) : undefined);
  const issueServing = async (): Promise<TlsMaterial> => {
    const { certChainPem, keyPem } = await meshCa!.ca.genKeyCert(dnsNames, settings.selfSignedCaTtlMs);
    return { cert: Buffer.from(certChainPem), key: Buffer.from(keyPem), ca: rootsBuffer() };
  };
  // With a registration authority, the daemon's own certificate comes from the same signer (unless
  // PILOT_CERT_PROVIDER names another): there is no built-in CA to sign it.
  const orchSigner = servingSigner ?? (registrationAuthority && settings.certProvider === 'istiod' ? settings.orchSigner : undefined);
  let servingTimer: NodeJS.Timeout | undefined;
  const issueFromOrchestrator = async (): Promise<TlsMaterial> => {
    const c = await orchServingCertificate(orch!, {
      signerName: orchSigner!,
      dnsNames,
      ttlMs: settings.selfSignedCaTtlMs,
      mountedRootPem: readExternalRoot(path.resolve(EXTERNAL_CA_ROOT_FILE)),
    });
    if (externalRoot !== c.rootPem) {
      externalRoot = c.rootPem;
      void publication.publish(externalRoot);
      for (const l of bundleListeners) l(externalRoot);
    }
    // Re-issued at half its life, as a workload certificate is.
    const renewIn = Math.max(60_000, (c.notAfter.getTime() - Date.now()) / 2);
    clearTimeout(servingTimer);
    servingTimer = setTimeout(() => {
      issueFromOrchestrator().then(
        (m) => {
          serving?.set(m);
          log.info(`renewed the serving certificate from ${orchSigner} for [${dnsNames.join(' ')}]`);
        },
        (e: unknown) => log.error(`failed renewing the serving certificate from ${orchSigner}: ${(e as Error).message}`),
      );
    }, Math.min(renewIn, 2 ** 31 - 1));
    servingTimer.unref();
    return { cert: Buffer.from(c.certChainPem), key: Buffer.from(c.keyPem), ca: Buffer.from(c.rootPem) };
  };
  if (orchSigner !== undefined) {
    try {
      serving = new MutableTlsSource(await issueFromOrchestrator());
    } catch (e) {
      orch?.close();
      throw new CommandError(`failed to get the serving certificate from the orchestrator's signer ${orchSigner}: ${(e as Error).message}`);
    }
    log.info(`serving certificate for [${dnsNames.join(' ')}] signed by ${orchSigner}`);
  } else if (!meshCa) {
    noTlsReason = 'no --tlsCertFile/--tlsKeyFile given and the CA is disabled (ENABLE_CA_SERVER=false)';
  } else if (settings.certProvider !== 'istiod') {
    log.warn(`PILOT_CERT_PROVIDER=${settings.certProvider}: no serving certificate is issued (use istiod or k8s.io/<signerName>)`);
    noTlsReason = `no --tlsCertFile/--tlsKeyFile given and PILOT_CERT_PROVIDER=${settings.certProvider} issues no serving certificate`;
  } else {
    serving = new MutableTlsSource(await issueServing());
    log.info(`Generating meshd-signed cert for [${dnsNames.join(' ')}]`);
  }

  const fileSources = new Set<MutableTlsSource>();
  if (meshCa) {
    const ca = meshCa;
    ca.onChange((b: KeyCertBundle) => {
      void publication.publish(b.rootCertPem);
      for (const l of bundleListeners) l(b.rootCertPem);
      for (const s of fileSources) s.set({ ...s.current(), ca: Buffer.from(b.rootCertPem) });
      if (serving) {
        issueServing().then(
          (m) => {
            serving!.set(m);
            log.info(`regenerated meshd dns cert for [${dnsNames.join(' ')}]`);
          },
          (e: unknown) => log.error(`failed generating meshd key cert: ${(e as Error).message}`),
        );
      }
    });
  }

  return {
    settings,
    ca: meshCa,
    authenticators,
    gate,
    trustDomain: facts.trustDomain,
    noTlsReason,
    caBundle: () => meshCa?.ca.bundle.rootCertPem ?? (externalRoot !== '' ? externalRoot : undefined),
    onCaBundleChange(fn) {
      bundleListeners.add(fn);
      return () => void bundleListeners.delete(fn);
    },
    serverTls(files: TlsMaterial | undefined): TlsSource | undefined {
      if (files) {
        if (files.ca || !meshCa) return new MutableTlsSource(files);
        // The operator's certificate, but client certificates are the mesh's: verify them against its roots.
        const s = new MutableTlsSource({ ...files, ca: rootsBuffer() });
        fileSources.add(s);
        return s;
      }
      return serving;
    },
    async authenticateDebug(req: IncomingMessage) {
      const sock = req.socket;
      const secure = sock instanceof TLSSocket;
      const cert = secure && sock.authorized ? sock.getPeerCertificate().raw : undefined;
      // A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d.
      const host = (sock.remoteAddress ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
      const r = await authenticateAny(authenticators, {
        secure,
        remoteAddress: joinHostPort(host, sock.remotePort ?? 0),
        peerCertificate: cert,
        header: (name) => {
          const v = req.headers[name];
          return v === undefined ? [] : Array.isArray(v) ? v : [v];
        },
      });
      if (!r.identities) log.warn(`debug request from ${host} not authenticated: ${r.failures.join('; ')}`);
      return r.identities;
    },
    registerGrpc(server: grpc.Server, opts: { secure: boolean }) {
      const issuer = meshCa ? caIssuer(meshCa.ca) : registrationAuthority;
      if (!issuer) return;
      registerCaService(server, { issuer, authenticators: () => authenticators, gate, nodeAuthorizer }, opts);
      log.info(`CA service istio.v1.auth.IstioCertificateService on the ${opts.secure ? 'secure' : 'plaintext'} gRPC listener`);
    },
    async close() {
      clearTimeout(servingTimer);
      publication.close();
      meshCa?.close();
      orch?.close();
    },
  };
}
