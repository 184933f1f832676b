// The daemon's CA as its settings choose it (Istio's maybeCreateCA, createIstioCA and createIstioRA): none
// (ENABLE_CA_SERVER=false), the orchestrator's certificate API as a registration authority (EXTERNAL_CA),
// or the built-in CA over the cacerts Secret (with a cluster) or files (without). Settings that cannot work
// together are refused before anything starts.
import path from 'node:path';
import { CommandError } from '../../cli/context';
import type { OrchClient } from '../../config/orch';
import { EXTERNAL_CA_ORCH, EXTERNAL_CA_ROOT_FILE, OrchRegistrationAuthority } from '../../ca/ra';
import { CaStartError, MeshCa } from '../../ca/runtime';
import type { CaSettings } from '../../ca/settings';
import { FileCaStore, SecretCaStore } from '../../ca/store';
import { registerScope } from '../../lib/log';

const log = registerScope('security', 'daemon identity');

export interface DaemonCa {
  /** The built-in CA, when it signs. */
  meshCa?: MeshCa;
  /** The orchestrator's signer, when EXTERNAL_CA names it. */
  registrationAuthority?: OrchRegistrationAuthority;
}

/**
 * Refuses settings that cannot work together; returns the signer PILOT_CERT_PROVIDER=k8s.io/<signerName>
 * names for the serving certificate, if any.
 */
export function checkCaSettings(settings: CaSettings, orchestrator: boolean): string | undefined {
  const ra = settings.externalCa !== '';
  if (ra && settings.externalCa !== EXTERNAL_CA_ORCH) {
    throw new CommandError(`EXTERNAL_CA=${settings.externalCa}: invalid CA name; the registration authority mesh has is ${EXTERNAL_CA_ORCH}`);
  }
  if (settings.certProvider === 'kubernetes') throw new CommandError('PILOT_CERT_PROVIDER=kubernetes is no longer supported by upstream Kubernetes');
  // PILOT_CERT_PROVIDER=k8s.io/<signerName>: the serving certificate from that signer of the certificate API.
  const servingSigner = settings.certProvider.startsWith('k8s.io/') ? settings.certProvider.slice('k8s.io/'.length) : undefined;
  if (servingSigner === '') throw new CommandError('PILOT_CERT_PROVIDER=k8s.io/ names no signer: give k8s.io/<signerName>');
  if ((ra || servingSigner !== undefined) && !orchestrator) {
    throw new CommandError(
      `${ra ? `EXTERNAL_CA=${settings.externalCa}` : `PILOT_CERT_PROVIDER=${settings.certProvider}`} signs through the orchestrator's certificate API: give --orchconfig or run inside a cluster`,
    );
  }
  if (ra && settings.orchSigner === '') {
    throw new CommandError(`EXTERNAL_CA=${EXTERNAL_CA_ORCH} needs ORCH_SIGNER: the signerName of the signer that issues workload certificates`);
  }
  return servingSigner;
}

/** The CA the settings ask for; `orch` is there whenever checkCaSettings let a registration authority through. */
export async function startCa(settings: CaSettings, trustDomain: string, orch: OrchClient | undefined, namespace: string): Promise<DaemonCa> {
  if (settings.enabled && settings.externalCa !== '') {
    const registrationAuthority = new OrchRegistrationAuthority({
      api: orch!,
      signer: settings.orchSigner,
      signerDomain: settings.certSignerDomain,
      defaultCertTtlMs: settings.defaultWorkloadCertTtlMs,
      maxCertTtlMs: settings.maxWorkloadCertTtlMs,
      rootCertFile: path.resolve(EXTERNAL_CA_ROOT_FILE),
    });
    log.info(`registration authority: workload certificates are signed by ${settings.orchSigner} through the orchestrator's certificate API`);
    return { registrationAuthority };
  }
  if (!settings.enabled) {
    log.info('ENABLE_CA_SERVER is false: no CA, no CA service; the secure listeners need --tlsCertFile/--tlsKeyFile');
    return {};
  }
  const store = orch ? new SecretCaStore(orch, namespace, settings.useCacertsForSelfSigned) : new FileCaStore();
  let meshCa: MeshCa;
  try {
    meshCa = await MeshCa.start({ settings, trustDomain, store });
  } catch (e) {
    if (e instanceof CaStartError) throw new CommandError(e.message);
    throw new CommandError(`failed to create CA: ${(e as Error).message}`);
  }
  log.info(`CA (${meshCa.kind}) signing with the root in ${meshCa.source}`);
  return { meshCa };
}
