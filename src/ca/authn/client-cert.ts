// Renewal: a caller holding a certificate this CA issued (verified during the TLS handshake against the mesh
// roots) is whoever that certificate names — every subjectAltName value, as Istio's ClientCertAuthenticator
// reads them.
import { CertificateError, parseCertificate } from '../pkix/cert';
import { AuthnError, type Authenticator, type AuthRequest, type Caller } from './types';

export class ClientCertAuthenticator implements Authenticator {
  readonly type = 'ClientCertAuthenticator';

  async authenticate(req: AuthRequest): Promise<Caller> {
    if (!req.secure) throw new AuthnError('unsupported auth type: a plaintext connection carries no client certificate');
    if (!req.peerCertificate) throw new AuthnError('no verified chain is found: no client certificate is presented');
    let sans;
    try {
      sans = parseCertificate(req.peerCertificate).sans;
    } catch (e) {
      if (e instanceof CertificateError) throw new AuthnError(e.message, true);
      throw e;
    }
    if (sans.length === 0) throw new AuthnError('the SAN extension does not exist', true);
    return { source: 'client-certificate', identities: sans.map((s) => s.value) };
  }
}
