// CommonTlsContext (DownstreamTlsContext / UpstreamTlsContext) → Node TLS options, with certificates
// and validation contexts inline, from files or from SDS secrets. Peer verification follows Envoy:
// no validation context = no verification; trusted_ca verifies the chain (unless ACCEPT_UNTRUSTED);
// SAN matchers and certificate hashes are checked on top; hostnames are not checked against SNI.
import { createHash, X509Certificate } from 'node:crypto';
import tls from 'node:tls';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import type { CommonTlsContext } from '../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import {
  CertificateValidationContext_TrustChainVerification,
  SubjectAltNameMatcher_SanType,
  TlsParameters_TlsProtocol,
  type CertificateValidationContext,
} from '../../gen/envoy/extensions/transport_sockets/tls/v3/common_pb';
import { compileStringMatcher, type StringMatch } from '../matchers/string';
import { ConfigError } from '../common/config-error';
import { readDataSource } from '../common/data-source';
import { certPair, sourcePath, type ContextCerts } from './certificate';
import type { SecretManager, SecretWatch } from './secrets';
import { urlEncodePem } from './pem';
import type { DownstreamConnectionInfo, SslDetails } from '../stream-info';

const PROTOCOLS: Record<number, tls.SecureVersion | undefined> = {
  [TlsParameters_TlsProtocol.TLS_AUTO]: undefined,
  [TlsParameters_TlsProtocol.TLSv1_0]: 'TLSv1',
  [TlsParameters_TlsProtocol.TLSv1_1]: 'TLSv1.1',
  [TlsParameters_TlsProtocol.TLSv1_2]: 'TLSv1.2',
  [TlsParameters_TlsProtocol.TLSv1_3]: 'TLSv1.3',
};
const TLS13_SUITES = 'TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256';

interface SanCheck {
  type: 'dns' | 'uri' | 'email' | 'ip' | 'any';
  match: StringMatch;
}

interface Validation {
  ca: Buffer | undefined;
  /** Where the CA came from, as Envoy's /certs names it: the file, or `<inline>`. */
  caPath: string;
  sans: SanCheck[];
  hashes: string[];
  acceptUntrusted: boolean;
  allowExpired: boolean;
}

export interface PeerInfo {
  presented: boolean;
  validated: boolean;
  uriSans: string[];
  dnsSans: string[];
  /** RFC 2253 (Envoy's subjectPeerCertificate). */
  subject: string;
  ssl: SslDetails | undefined;
}

/** Records what the handshake established about the peer on the connection's info. */
export function applyPeer(info: DownstreamConnectionInfo, peer: PeerInfo): void {
  info.peerCertificatePresented = peer.presented;
  info.peerCertificateValidated = peer.validated;
  info.peerUriSans = peer.uriSans;
  info.peerDnsSans = peer.dnsSans;
  info.peerSubject = peer.subject;
  if (peer.ssl) info.ssl = peer.ssl;
}

/**
 * OpenSSL's RFC 2253 rendering (XN_FLAG_RFC2253): RDNs last-to-first, comma-separated. Node's
 * X509Certificate.subject is the multi-line form with values already escaped the RFC 2253 way.
 */
export function rfc2253(multiline: string | undefined): string {
  if (!multiline) return '';
  return multiline
    .split('\n')
    .filter((l) => l !== '')
    .reverse()
    .map((l) => l.replace(/ \+ /g, '+'))
    .join(',');
}

function sslDetails(socket: TLSSocket, peer: X509Certificate): SslDetails {
  const local = socket.getX509Certificate();
  let chain: string | undefined;
  let pem: string | undefined;
  return {
    sha256PeerCertificateDigest: peer.fingerprint256.replace(/:/g, '').toLowerCase(),
    uriSanLocalCertificate: local ? parseSans(local.subjectAltName).uri : [],
    urlEncodedPemEncodedPeerCertificate: () => (pem ??= urlEncodePem(peer.toString())),
    urlEncodedPemEncodedPeerCertificateChain: () => {
      if (chain === undefined) {
        // the peer's certificates as they chain up, without the self-signed root
        const parts: string[] = [];
        let c: tls.DetailedPeerCertificate | undefined = socket.getPeerCertificate(true) as tls.DetailedPeerCertificate;
        const seen = new Set<string>();
        while (c && c.raw && !seen.has(c.fingerprint256)) {
          seen.add(c.fingerprint256);
          const x = new X509Certificate(c.raw);
          if (parts.length > 0 && x.checkIssued(x)) break;
          parts.push(x.toString());
          c = c.issuerCertificate;
        }
        chain = urlEncodePem(parts.join(''));
      }
      return chain;
    },
  };
}

/** SANs from Node's `subjectaltname` string (`DNS:a, URI:spiffe://…, IP Address:1.2.3.4`). */
export function parseSans(s: string | undefined): { dns: string[]; uri: string[]; email: string[]; ip: string[] } {
  const out = { dns: [] as string[], uri: [] as string[], email: [] as string[], ip: [] as string[] };
  for (const part of (s ?? '').split(/,\s*/)) {
    const i = part.indexOf(':');
    if (i < 0) continue;
    const k = part.slice(0, i);
    const v = part.slice(i + 1).replace(/^"|"$/g, '');
    if (k === 'DNS') out.dns.push(v);
    else if (k === 'URI') out.uri.push(v);
    else if (k === 'email') out.email.push(v);
    else if (k === 'IP Address') out.ip.push(v);
  }
  return out;
}

function compileValidation(v: CertificateValidationContext, where: string): Validation {
  const sans: SanCheck[] = [];
  v.matchTypedSubjectAltNames.forEach((m, i) => {
    const t = m.sanType;
    const type =
      t === SubjectAltNameMatcher_SanType.DNS
        ? 'dns'
        : t === SubjectAltNameMatcher_SanType.URI
          ? 'uri'
          : t === SubjectAltNameMatcher_SanType.EMAIL
            ? 'email'
            : t === SubjectAltNameMatcher_SanType.IP_ADDRESS
              ? 'ip'
              : undefined;
    if (!type) throw new ConfigError(`${where}.match_typed_subject_alt_names[${i}].san_type: unsupported SAN type`);
    sans.push({ type, match: compileStringMatcher(m.matcher, `${where}.match_typed_subject_alt_names[${i}].matcher`) });
  });
  v.matchSubjectAltNames.forEach((m, i) => sans.push({ type: 'any', match: compileStringMatcher(m, `${where}.match_subject_alt_names[${i}]`) }));
  if (v.verifyCertificateSpki.length > 0) throw new ConfigError(`${where}.verify_certificate_spki: not supported`);
  return {
    ca: readDataSource(v.trustedCa, `${where}.trusted_ca`),
    caPath: sourcePath(v.trustedCa),
    sans,
    hashes: v.verifyCertificateHash.map((h) => h.replace(/:/g, '').toLowerCase()),
    acceptUntrusted: v.trustChainVerification === CertificateValidationContext_TrustChainVerification.ACCEPT_UNTRUSTED,
    allowExpired: v.allowExpiredCertificate,
  };
}

function mergeValidation(base: Validation | undefined, over: Validation | undefined): Validation | undefined {
  if (!base) return over;
  if (!over) return base;
  return {
    ca: over.ca ?? base.ca,
    caPath: over.ca ? over.caPath : base.caPath,
    sans: [...base.sans, ...over.sans],
    hashes: [...base.hashes, ...over.hashes],
    acceptUntrusted: base.acceptUntrusted || over.acceptUntrusted,
    allowExpired: base.allowExpired || over.allowExpired,
  };
}

export interface TlsContextOptions {
  role: 'server' | 'client';
  requireClientCertificate?: boolean;
  sni?: string;
  /** Client: UpstreamTlsContext.max_session_keys (Envoy's default 1; 0 turns session resumption off). */
  maxSessionKeys?: number;
}

/** Sessions kept per client context at most (one per upstream host, the oldest dropped first). */
const MAX_SESSION_HOSTS = 1024;

/**
 * A server context that asks for client certificates must name its session id context, or OpenSSL fails
 * every handshake that offers a session to resume ("session id context uninitialized") instead of doing a
 * full one — and clients resume by default (Envoy's max_session_keys 1, and ours). Envoy derives it from the
 * context's certificates and validation material, as here (tls.Server does the same with a fixed value).
 */
function setSessionIdContext(sc: tls.SecureContext, o: tls.SecureContextOptions): void {
  const h = createHash('sha256');
  for (const c of [o.cert, o.ca].flat()) if (c) h.update(c as Buffer | string);
  (sc as unknown as { context: { setSessionIdContext(id: string): void } }).context.setSessionIdContext(h.digest('hex').slice(0, 32));
}

/**
 * The TLS side of a filter chain or cluster. Inline material is read at construction (a bad file is a
 * config error); SDS material arrives later (`ready`) and updates `secureOptions()` in place.
 */
export class TlsContext {
  readonly ready: Promise<void>;
  private readonly watches: SecretWatch[] = [];
  private cached: tls.SecureContextOptions | undefined;
  private cachedContext: tls.SecureContext | undefined;
  /** validation(): compiled once per change of the validation secret. */
  private cachedValidation: { v: Validation | undefined } | undefined;
  /**
   * Client: the last TLS session each upstream host gave us, offered on the next connection to it (a resumed
   * handshake skips the certificate signature and chain verification on both sides). Emptied whenever the
   * material changes, so that no connection resumes a session made with an old certificate.
   */
  private readonly sessions = new Map<string, Buffer>();
  private readonly listeners = new Set<() => void>();
  private readonly staticCerts: Array<{ cert: Buffer; key: Buffer; passphrase?: string; path: string }>;
  private readonly certWatches: SecretWatch[];
  private readonly staticValidation: Validation | undefined;
  private readonly validationWatch: SecretWatch | undefined;
  readonly alpn: string[];
  private readonly minVersion: tls.SecureVersion | undefined;
  private readonly maxVersion: tls.SecureVersion | undefined;
  private readonly ciphers: string | undefined;
  private readonly ecdhCurve: string | undefined;

  constructor(
    common: CommonTlsContext | undefined,
    readonly opts: TlsContextOptions,
    secrets: SecretManager,
    readonly where: string,
  ) {
    const c = common;
    this.alpn = c?.alpnProtocols ?? [];
    this.staticCerts = (c?.tlsCertificates ?? []).map((t, i) => certPair(t, `${where}.tls_certificates[${i}]`));
    this.certWatches = (c?.tlsCertificateSdsSecretConfigs ?? []).map((s, i) => secrets.watch(s, `${where}.tls_certificate_sds_secret_configs[${i}]`));
    let validation: Validation | undefined;
    let vWatch: SecretWatch | undefined;
    const vt = c?.validationContextType;
    if (vt?.case === 'validationContext') validation = compileValidation(vt.value, `${where}.validation_context`);
    else if (vt?.case === 'validationContextSdsSecretConfig') vWatch = secrets.watch(vt.value, `${where}.validation_context_sds_secret_config`);
    else if (vt?.case === 'combinedValidationContext') {
      if (vt.value.defaultValidationContext)
        validation = compileValidation(vt.value.defaultValidationContext, `${where}.combined_validation_context.default_validation_context`);
      if (vt.value.validationContextSdsSecretConfig)
        vWatch = secrets.watch(
          vt.value.validationContextSdsSecretConfig,
          `${where}.combined_validation_context.validation_context_sds_secret_config`,
        );
    } else if (vt?.case) throw new ConfigError(`${where}: certificate provider validation contexts are not supported`);
    this.staticValidation = validation;
    this.validationWatch = vWatch;
    this.watches.push(...this.certWatches, ...(vWatch ? [vWatch] : []));
    const p = c?.tlsParams;
    this.minVersion = p ? PROTOCOLS[p.tlsMinimumProtocolVersion] : undefined;
    this.maxVersion = p ? PROTOCOLS[p.tlsMaximumProtocolVersion] : undefined;
    const suites = (p?.cipherSuites ?? []).flatMap((s) => s.replace(/^\[|\]$/g, '').split('|')).filter(Boolean);
    this.ciphers = suites.length > 0 ? `${TLS13_SUITES}:${suites.join(':')}` : undefined;
    this.ecdhCurve = p && p.ecdhCurves.length > 0 ? p.ecdhCurves.join(':') : undefined;
    if (opts.role === 'server' && this.staticCerts.length === 0 && this.certWatches.length === 0) {
      throw new ConfigError(`${where}: No TLS certificates found for server context`);
    }
    for (const w of this.watches) {
      w.onChange(() => {
        this.cached = undefined;
        this.cachedContext = undefined;
        this.cachedValidation = undefined;
        this.sessions.clear();
        for (const l of this.listeners) l();
      });
    }
    this.ready = Promise.all(this.watches.map((w) => w.ready)).then(() => undefined);
    // the admin's /certs lists every live context, as Envoy's context manager does
    secrets.contexts.add(this);
    this.unregister = () => secrets.contexts.delete(this);
    // static material is checked now: a bad PEM is a config error, not a failed handshake later
    if (this.watches.length === 0) this.secureContext();
  }

  onChange(cb: () => void): void {
    this.listeners.add(cb);
  }

  private readonly unregister: () => void;

  /** The certificates this context uses now (SDS material that has not arrived is not there yet). */
  certsInUse(): ContextCerts {
    const v = this.validation();
    return { ca: v?.ca ? { pem: v.ca, path: v.caPath } : undefined, chain: this.certs().map((c) => ({ pem: c.cert, path: c.path })) };
  }

  release(): void {
    this.unregister();
    for (const w of this.watches) w.release();
    this.listeners.clear();
  }

  private validation(): Validation | undefined {
    if (this.cachedValidation) return this.cachedValidation.v;
    let dyn: Validation | undefined;
    const s = this.validationWatch?.current();
    if (s?.type.case === 'validationContext') dyn = compileValidation(s.type.value, `${this.where}: secret '${s.name}'`);
    const v = mergeValidation(this.staticValidation, dyn);
    // not kept while the secret is still awaited: its arrival (onChange) would have nothing to clear
    if (!this.validationWatch || s) this.cachedValidation = { v };
    return v;
  }

  /** Certificates currently available (static + SDS that arrived). */
  private certs(): Array<{ cert: Buffer; key: Buffer; passphrase?: string; path: string }> {
    const out = [...this.staticCerts];
    for (const w of this.certWatches) {
      const s = w.current();
      if (s?.type.case === 'tlsCertificate') out.push(certPair(s.type.value, `${this.where}: secret '${s.name}'`));
    }
    return out;
  }

  /** True once every certificate the context names is there (SDS may still be missing). */
  hasCertificates(): boolean {
    return this.opts.role === 'client' || this.certs().length > 0;
  }

  secureOptions(): tls.SecureContextOptions & { rejectUnauthorized: boolean; requestCert?: boolean } {
    if (!this.cached) {
      const certs = this.certs();
      const v = this.validation();
      const o: tls.SecureContextOptions = {};
      if (certs.length > 0) {
        o.cert = certs.map((c) => c.cert);
        o.key = certs.map((c) => (c.passphrase ? { pem: c.key, passphrase: c.passphrase } : { pem: c.key }));
      }
      if (v?.ca) o.ca = v.ca;
      if (this.minVersion) o.minVersion = this.minVersion;
      if (this.maxVersion) o.maxVersion = this.maxVersion;
      if (this.ciphers) o.ciphers = this.ciphers;
      if (this.ecdhCurve) o.ecdhCurve = this.ecdhCurve;
      this.cached = o;
    }
    const v = this.validation();
    // chain verification by OpenSSL only in the plain case; other rules are checked in verifyPeer()
    const strict = !!v?.ca && !v.acceptUntrusted && !v.allowExpired;
    if (this.opts.role === 'server') {
      return {
        ...this.cached,
        requestCert: !!v || !!this.opts.requireClientCertificate,
        rejectUnauthorized: strict && !!this.opts.requireClientCertificate,
      };
    }
    return { ...this.cached, rejectUnauthorized: strict };
  }

  /** Client: the session to offer when connecting to `hostKey` (undefined: a full handshake). */
  session(hostKey: string): Buffer | undefined {
    return this.sessions.get(hostKey);
  }

  /** Client: keeps a session the server gave on a connection made with `context` (dropped when that is stale). */
  saveSession(hostKey: string, context: tls.SecureContext, session: Buffer): void {
    if ((this.opts.maxSessionKeys ?? 1) === 0 || context !== this.cachedContext) return;
    this.sessions.delete(hostKey);
    this.sessions.set(hostKey, session);
    if (this.sessions.size > MAX_SESSION_HOSTS) this.sessions.delete(this.sessions.keys().next().value!);
  }

  /** Whether sessions are resumed (client contexts unless max_session_keys is 0). */
  get resumesSessions(): boolean {
    return this.opts.role === 'client' && (this.opts.maxSessionKeys ?? 1) > 0;
  }

  /** The SecureContext of this material (built once per certificate change, shared by every connection). Throws ConfigError on bad PEM. */
  secureContext(): tls.SecureContext {
    if (!this.cachedContext) {
      let sc: tls.SecureContext;
      try {
        sc = tls.createSecureContext(this.secureOptions());
      } catch (e) {
        throw new ConfigError(`${this.where}: invalid TLS material: ${(e as Error).message}`);
      }
      if (this.opts.role === 'server') setSessionIdContext(sc, this.secureOptions());
      this.cachedContext = sc;
    }
    return this.cachedContext;
  }

  /** Envoy's extra checks after the handshake: undefined when the peer is acceptable, else why not. */
  verifyPeer(socket: TLSSocket): { error?: string; peer: PeerInfo } {
    const cert = socket.getPeerCertificate(false) as PeerCertificate | Record<string, never>;
    const presented = !!cert && Object.keys(cert).length > 0;
    const sans = parseSans(presented ? (cert as PeerCertificate).subjectaltname : undefined);
    // from the DER Node already copied, not getPeerX509Certificate(): on a client socket (Node 20) that call
    // takes the leaf out of the connection's peer chain (sk_X509_delete in X509Certificate::GetPeerCert), so
    // every later getPeerCertificate() shows none (or the issuer), and the client side's
    // destination_principal (tls/identities.ts, read after this check) came out `unknown`
    const x509 = presented && (cert as PeerCertificate).raw ? new X509Certificate((cert as PeerCertificate).raw) : undefined;
    const peer: PeerInfo = {
      presented,
      validated: false,
      uriSans: sans.uri,
      dnsSans: sans.dns,
      subject: rfc2253(x509?.subject),
      ssl: x509 ? sslDetails(socket, x509) : undefined,
    };
    const v = this.validation();
    if (this.opts.role === 'server' && this.opts.requireClientCertificate && !presented) return { error: 'peer did not return a certificate', peer };
    if (!v || !presented) return { peer };
    if (v.ca && !socket.authorized && !v.acceptUntrusted) {
      const err = String(socket.authorizationError ?? '');
      if (!(v.allowExpired && err === 'CERT_HAS_EXPIRED')) return { error: `certificate verify failed: ${err}`, peer };
    }
    if (v.sans.length > 0) {
      const ok = v.sans.some((s) => {
        const list =
          s.type === 'any'
            ? [...sans.dns, ...sans.uri, ...sans.email, ...sans.ip]
            : s.type === 'dns'
              ? sans.dns
              : s.type === 'uri'
                ? sans.uri
                : s.type === 'email'
                  ? sans.email
                  : sans.ip;
        return list.some((x) => s.match(x));
      });
      if (!ok) return { error: 'certificate verify failed: SAN mismatch', peer };
    }
    if (v.hashes.length > 0) {
      const fp = String((cert as PeerCertificate).fingerprint256 ?? '')
        .replace(/:/g, '')
        .toLowerCase();
      if (!v.hashes.includes(fp)) return { error: 'certificate verify failed: certificate hash mismatch', peer };
    }
    peer.validated = true;
    return { peer };
  }

  /** Whether OpenSSL alone decides (no extra checks after the handshake). */
  needsPostHandshakeCheck(): boolean {
    const v = this.validation();
    return !!v && (v.sans.length > 0 || v.hashes.length > 0 || v.acceptUntrusted || v.allowExpired || !v.ca);
  }
}
