// The roots the daemon's certificates chain to (Istio's CA bundle watcher): the built-in CA's root, or the
// external signer's (as mounted, then as the signer returns it). Without a cluster they are published in the
// file agents read; in a cluster the namespace controller (leader only) writes them into every namespace from
// bundle(). Either way the listeners that verify client certificates follow them.
import type { KeyCertBundle } from '../../ca/bundle';
import { FileRootPublisher, RootPublication } from '../../ca/publish';
import type { OrchRegistrationAuthority } from '../../ca/ra';
import type { MeshCa } from '../../ca/runtime';

export class CaRoots {
  private readonly listeners = new Set<(pem: string) => void>();

  private constructor(
    private readonly meshCa: MeshCa | undefined,
    private readonly publication: RootPublication,
    private externalRoot: string,
  ) {}

  /** Publishes the roots there are now: the CA's, and the external CA's as the operator mounted it (Istio's ./etc/external-ca-cert). */
  static async start(o: { meshCa?: MeshCa; registrationAuthority?: OrchRegistrationAuthority; cluster: boolean }): Promise<CaRoots> {
    const publication = new RootPublication(o.cluster ? [] : [new FileRootPublisher()]);
    if (o.meshCa) await publication.publish(o.meshCa.ca.bundle.rootCertPem);
    const externalRoot = o.registrationAuthority?.mountedRoot() ?? '';
    if (externalRoot !== '') await publication.publish(externalRoot);
    return new CaRoots(o.meshCa, publication, externalRoot);
  }

  /** The PEM bundle, undefined without a CA. */
  bundle(): string | undefined {
    return this.meshCa?.ca.bundle.rootCertPem ?? (this.externalRoot !== '' ? this.externalRoot : undefined);
  }

  /** The roots client certificates are verified against. */
  buffer(): Buffer | undefined {
    if (this.meshCa) return Buffer.from(this.meshCa.ca.bundle.rootCertPem);
    return this.externalRoot !== '' ? Buffer.from(this.externalRoot) : undefined;
  }

  /** The root the external signer returned with a certificate: published and announced when it is new. */
  externalSignerRoot(pem: string): void {
    if (this.externalRoot === pem) return;
    this.externalRoot = pem;
    this.changed(pem);
  }

  /** The built-in CA's material changed (root rotation, plugged-in certificates reloaded). */
  caChanged(b: KeyCertBundle): void {
    this.changed(b.rootCertPem);
  }

  private changed(pem: string): void {
    void this.publication.publish(pem);
    for (const l of this.listeners) l(pem);
  }

  onChange(fn: (pem: string) => void): () => void {
    this.listeners.add(fn);
    return () => void this.listeners.delete(fn);
  }

  close(): void {
    this.publication.close();
  }
}
