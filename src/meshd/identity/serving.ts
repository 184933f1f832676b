// The certificate :15012 and :15017 serve when the operator brings none (Istio's initIstiodCerts): issued by
// the built-in CA (PILOT_CERT_PROVIDER=istiod) and re-issued when its material changes, or signed by the
// orchestrator's certificate API (PILOT_CERT_PROVIDER=k8s.io/<signerName>, or the registration authority's
// signer) and renewed at half its life. The operator's files win; their client certificates are then
// verified against the mesh roots unless --caCertFile names others.
import path from 'node:path';
import { CommandError } from '../../cli/context';
import type { OrchClient } from '../../config/orch';
import type { KeyCertBundle } from '../../ca/bundle';
import { orchServingCertificate } from '../../ca/orch-csr';
import { EXTERNAL_CA_ROOT_FILE, readExternalRoot } from '../../ca/ra';
import type { MeshCa } from '../../ca/runtime';
import type { CaSettings } from '../../ca/settings';
import { registerScope } from '../../lib/log';
import { MutableTlsSource, type TlsMaterial, type TlsSource } from '../../serve/tls';
import type { CaRoots } from './publish';

const log = registerScope('security', 'daemon identity');

export interface ServingOptions {
  settings: CaSettings;
  meshCa?: MeshCa;
  orch?: OrchClient;
  /** The orchestrator signer of the serving certificate, when it is not the built-in CA's to issue. */
  orchSigner?: string;
  roots: CaRoots;
  dnsNames: readonly string[];
}

export class ServingTls {
  private serving: MutableTlsSource | undefined;
  /** Why there is no serving certificate, when there is none. */
  noTlsReason: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The operator's certificates whose client certificates are verified against the mesh roots. */
  private readonly fileSources = new Set<MutableTlsSource>();

  private constructor(private readonly o: ServingOptions) {}

  static async start(o: ServingOptions): Promise<ServingTls> {
    const s = new ServingTls(o);
    await s.issueFirst();
    return s;
  }

  private async issueFirst(): Promise<void> {
    const { settings, meshCa, orchSigner, dnsNames } = this.o;
    if (orchSigner !== undefined) {
      try {
        this.serving = new MutableTlsSource(await this.issueFromOrchestrator(orchSigner));
      } catch (e) {
        throw new CommandError(`failed to get the serving certificate from the orchestrator's signer ${orchSigner}: ${(e as Error).message}`);
      }
      log.info(`serving certificate for [${dnsNames.join(' ')}] signed by ${orchSigner}`);
    } else if (!meshCa) {
      this.noTlsReason = 'no --tlsCertFile/--tlsKeyFile given and the CA is disabled (ENABLE_CA_SERVER=false)';
    } else if (settings.certProvider !== 'istiod') {
      log.warn(`PILOT_CERT_PROVIDER=${settings.certProvider}: no serving certificate is issued (use istiod or k8s.io/<signerName>)`);
      this.noTlsReason = `no --tlsCertFile/--tlsKeyFile given and PILOT_CERT_PROVIDER=${settings.certProvider} issues no serving certificate`;
    } else {
      this.serving = new MutableTlsSource(await this.issueFromCa());
      log.info(`Generating meshd-signed cert for [${dnsNames.join(' ')}]`);
    }
  }

  private async issueFromCa(): Promise<TlsMaterial> {
    const { certChainPem, keyPem } = await this.o.meshCa!.ca.genKeyCert(this.o.dnsNames, this.o.settings.selfSignedCaTtlMs);
    return { cert: Buffer.from(certChainPem), key: Buffer.from(keyPem), ca: this.o.roots.buffer() };
  }

  private async issueFromOrchestrator(signerName: string): Promise<TlsMaterial> {
    const { dnsNames } = this.o;
    const c = await orchServingCertificate(this.o.orch!, {
      signerName,
      dnsNames,
      ttlMs: this.o.settings.selfSignedCaTtlMs,
      mountedRootPem: readExternalRoot(path.resolve(EXTERNAL_CA_ROOT_FILE)),
    });
    this.o.roots.externalSignerRoot(c.rootPem);
    // Re-issued at half its life, as a workload certificate is.
    const renewIn = Math.max(60_000, (c.notAfter.getTime() - Date.now()) / 2);
    clearTimeout(this.timer);
    this.timer = setTimeout(
      () => {
        this.issueFromOrchestrator(signerName).then(
          (m) => {
            this.serving?.set(m);
            log.info(`renewed the serving certificate from ${signerName} for [${dnsNames.join(' ')}]`);
          },
          (e: unknown) => log.error(`failed renewing the serving certificate from ${signerName}: ${(e as Error).message}`),
        );
      },
      Math.min(renewIn, 2 ** 31 - 1),
    );
    this.timer.unref();
    return { cert: Buffer.from(c.certChainPem), key: Buffer.from(c.keyPem), ca: Buffer.from(c.rootPem) };
  }

  /** The built-in CA's material changed: the operator's certificates verify against the new roots, ours is re-issued. */
  caChanged(b: KeyCertBundle): void {
    for (const s of this.fileSources) s.set({ ...s.current(), ca: Buffer.from(b.rootCertPem) });
    const serving = this.serving;
    if (!serving) return;
    this.issueFromCa().then(
      (m) => {
        serving.set(m);
        log.info(`regenerated meshd dns cert for [${this.o.dnsNames.join(' ')}]`);
      },
      (e: unknown) => log.error(`failed generating meshd key cert: ${(e as Error).message}`),
    );
  }

  /** TLS for the secure listeners: the operator's files (already read) when given, else the serving certificate. */
  serverTls(files: TlsMaterial | undefined): TlsSource | undefined {
    if (!files) return this.serving;
    if (files.ca || !this.o.meshCa) return new MutableTlsSource(files);
    // The operator's certificate, but client certificates are the mesh's: verify them against its roots.
    const s = new MutableTlsSource({ ...files, ca: this.o.roots.buffer() });
    this.fileSources.add(s);
    return s;
  }

  close(): void {
    clearTimeout(this.timer);
  }
}
