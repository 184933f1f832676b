// The daemon's identity (Istio's maybeCreateCA, initIstiodCerts, the authenticator list and RunCA), wired from
// its seams: the CA (ca.ts), the authenticator chain shared by the CA service, secured xDS and the debug
// endpoints (authenticators.ts), the published roots (publish.ts) and the certificate :15012 and :15017 serve
// when the operator brings none (serving.ts); then the CA service itself.
import fs from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { parse as parseYaml } from 'yaml';
import type * as grpc from '@grpc/grpc-js';
import { CommandError, type RunContext } from '../../cli/context';
import type { EnvTable } from '../../lib/env';
import type { OrchClient } from '../../config/orch';
import type { NodeAuthorizer } from '../../ca/authn/node-authorizer';
import type { AuthGate, Authenticator } from '../../ca/authn/types';
import type { OrchRegistrationAuthority } from '../../ca/ra';
import type { MeshCa } from '../../ca/runtime';
import { caIssuer, registerCaService } from '../../ca/server';
import { caSettingsFromEnv, type CaSettings, daemonDnsNames } from '../../ca/settings';
import { Closers } from '../../lib/closers';
import { registerScope } from '../../lib/log';
import type { XdsAuthenticate } from '../../xds/server';
import { daemonOrchClient } from '../orchestrator';
import type { IdentityProvider } from '../providers';
import type { TlsMaterial, TlsSource } from '../../serve/tls';
import { authenticateDebug, buildAuthenticators, nodeAuthorizerFor, xdsAuthenticator } from './authenticators';
import { checkCaSettings, startCa } from './ca';
import { CaRoots } from './publish';
import { ServingTls } from './serving';

const log = registerScope('security', 'daemon identity');

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

export interface DaemonIdentity extends IdentityProvider {
  readonly settings: CaSettings;
  readonly ca?: MeshCa;
  readonly trustDomain: string;
  /** The ADS server's authenticate hook: the CA service's chain, gated by XDS_AUTH / XDS_AUTH_PLAINTEXT. */
  readonly authenticateXds: XdsAuthenticate;
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
  const servingSigner = checkCaSettings(settings, o.orchestrator);

  let orch: OrchClient | undefined;
  if (o.orchestrator) {
    try {
      orch = await daemonOrchClient(ctx, env);
    } catch (e) {
      throw new CommandError((e as Error).message);
    }
  }
  // What is open so far: closed last-opened first when a later step fails, and by close().
  const closers = new Closers();
  if (orch) closers.add(() => orch.close());
  return closers.unwindOnError(async () => {
    const { meshCa, registrationAuthority } = await startCa(settings, facts.trustDomain, orch, namespace);
    if (meshCa) closers.add(() => meshCa.close());
    const authenticators = await buildAuthenticators({
      settings,
      trustDomain: facts.trustDomain,
      meshCa,
      orch,
      clusterId: ctx.flags['clusterID'] as string,
      clusterAliases: ctx.flags['clusterAliases'] as Record<string, string>,
      inCluster: Boolean(ctx.env['ORCH_SERVICE_HOST'] ?? ctx.env['KUBERNETES_SERVICE_HOST']),
    });
    const nodeAuthorizer = nodeAuthorizerFor(settings, orch);
    const roots = await CaRoots.start({ meshCa, registrationAuthority, cluster: orch !== undefined });
    closers.add(() => roots.close());
    // With a registration authority, the daemon's own certificate comes from the same signer (unless
    // PILOT_CERT_PROVIDER names another): there is no built-in CA to sign it.
    const orchSigner = servingSigner ?? (registrationAuthority && settings.certProvider === 'istiod' ? settings.orchSigner : undefined);
    const dnsNames = daemonDnsNames({
      namespace,
      discoveryHost: facts.discoveryHost,
      customHosts: settings.customHosts,
      revision: ctx.env['REVISION'],
    });
    const serving = await ServingTls.start({ settings, meshCa, orch, orchSigner, roots, dnsNames });
    closers.add(() => serving.close());
    meshCa?.onChange((b) => {
      roots.caChanged(b);
      serving.caChanged(b);
    });
    return daemonIdentity({
      settings,
      trustDomain: facts.trustDomain,
      meshCa,
      registrationAuthority,
      authenticators,
      nodeAuthorizer,
      roots,
      serving,
      close: () => closers.close(),
    });
  });
}

interface IdentityParts {
  settings: CaSettings;
  trustDomain: string;
  meshCa?: MeshCa;
  registrationAuthority?: OrchRegistrationAuthority;
  authenticators: readonly Authenticator[];
  nodeAuthorizer?: NodeAuthorizer;
  roots: CaRoots;
  serving: ServingTls;
  close: () => Promise<void>;
}

function daemonIdentity(p: IdentityParts): DaemonIdentity {
  const { settings, meshCa, registrationAuthority, authenticators, nodeAuthorizer, roots, serving } = p;
  const gate: AuthGate = { xdsAuth: settings.xdsAuth, xdsAuthPlaintext: settings.xdsAuthPlaintext };
  return {
    settings,
    ca: meshCa,
    trustDomain: p.trustDomain,
    authenticateXds: xdsAuthenticator(authenticators, gate),
    noTlsReason: serving.noTlsReason,
    caBundle: () => roots.bundle(),
    onCaBundleChange: (fn) => roots.onChange(fn),
    serverTls: (files: TlsMaterial | undefined): TlsSource | undefined => serving.serverTls(files),
    authenticateDebug: (req: IncomingMessage) => authenticateDebug(authenticators, req),
    registerGrpc(server: grpc.Server, opts: { secure: boolean }) {
      const issuer = meshCa ? caIssuer(meshCa.ca) : registrationAuthority;
      if (!issuer) return;
      registerCaService(server, { issuer, authenticators: () => authenticators, gate, nodeAuthorizer }, opts);
      log.info(`CA service istio.v1.auth.IstioCertificateService on the ${opts.secure ? 'secure' : 'plaintext'} gRPC listener`);
    },
    close: () => p.close(),
  };
}
