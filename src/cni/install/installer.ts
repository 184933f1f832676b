// The install loop (Istio's cni/pkg/install/install.go): put the binary, the plugin's client
// configuration and the CNI configuration in place, then watch them and the service account, and do it
// again whenever something changes; ready only while the installed configuration is intact. Cleanup
// takes back what was installed.
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { registerScope } from '../../lib/log';
import { defineCounter, defineGauge } from '../../lib/metrics';
import { PLUGIN_KUBECONFIG_NAME, PLUGIN_TYPE } from '../plugin/config';
import { copyBinaries, type BinarySource } from './binaries';
import { checkValidCNIConfig, createCNIConfigFile, removeCNIConfigFile, type CniConfigSettings } from './cniconfig';
import { ChangeWatcher } from './files';
import { writeKubeconfigFile, type KubeconfigSettings } from './kubeconfig';

const log = registerScope('cni-agent', 'CNI agent');

const installs = defineCounter({
  name: 'mesh_cni_installs_total',
  help: 'Total number of CNI plugins installed by the Mesh CNI installer',
  labelNames: ['result'] as const,
});
const installReady = defineGauge({ name: 'mesh_cni_install_ready', help: 'Whether the CNI plugin installation is ready or not' });

export const RESULT = {
  success: 'SUCCESS',
  copyBinariesFailure: 'COPY_BINARIES_FAILURE',
  createKubeconfigFailure: 'CREATE_KUBECONFIG_FAILURE',
  createCNIConfigFailure: 'CREATE_CNI_CONFIG_FAILURE',
} as const;

export interface InstallConfig extends CniConfigSettings, KubeconfigSettings {
  orchconfigMode: number;
  binarySources: readonly BinarySource[];
  binaryTargetDirs: readonly string[];
}

/** The installer's half of readiness (/readyz also waits for the other parts of the agent). */
export class Readiness {
  private ready = false;
  set(v: boolean): void {
    this.ready = v;
    installReady.set(v ? 1 : 0);
  }
  get(): boolean {
    return this.ready;
  }
}

/**
 * Tells a reinstall loop apart from the occasional reinstall: reinstalls more often than every 5 s wait
 * up to a second, and a run of them is reported (another component keeps reverting our work).
 */
class InstallationThrottle {
  private next = 0;
  private hits = 0;
  constructor(private readonly installer: Installer) {}

  async throttle(signal: AbortSignal): Promise<void> {
    const now = Date.now();
    if (now >= this.next) {
      this.next = now + 5000;
      this.hits = 0;
      return;
    }
    const delay = this.next - now;
    this.next += 5000;
    await sleep(Math.min(delay, 1000), signal);
    this.hits++;
    if (this.hits > 5) {
      const hint = this.installer.cniConfigFilepath.includes('cilium')
        ? " Hint: Cilium CNI was detected; ensure 'cni.exclusive=false' in the Cilium configuration."
        : '';
      log.warn(
        `Configuration has been reconciled multiple times in a short period of time. This may be due to a conflicting component constantly reverting our work.${hint}`,
      );
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export class InstallError extends Error {
  override name = 'InstallError';
}

export class Installer {
  cniConfigFilepath = '';
  readonly kubeconfigFilepath: string;

  constructor(
    readonly cfg: InstallConfig,
    readonly readiness: Readiness,
  ) {
    this.kubeconfigFilepath = path.join(cfg.cniAgentRunDir, PLUGIN_KUBECONFIG_NAME);
  }

  /** Binaries and client configuration every time; the CNI configuration only when it is not intact. */
  async installAll(signal: AbortSignal): Promise<string[]> {
    let copied: string[];
    try {
      copied = await copyBinaries(this.cfg.binarySources, this.cfg.binaryTargetDirs);
    } catch (e) {
      const msg = (e as Error).message;
      if (/read-only file system|EROFS/i.test(msg)) {
        log.warn(
          'hint: some orchestrator environments require customization of the CNI directory. Ensure you properly set global.platform=<name> during installation',
        );
      }
      installs.inc({ result: RESULT.copyBinariesFailure });
      throw new InstallError(`copy binaries: ${msg}`);
    }
    try {
      await writeKubeconfigFile(this.cfg, this.cfg.cniAgentRunDir, this.cfg.orchconfigMode);
    } catch (e) {
      installs.inc({ result: RESULT.createKubeconfigFailure });
      throw new InstallError(`write kubeconfig: ${(e as Error).message}`);
    }
    const why = checkValidCNIConfig(this.cfg, this.cniConfigFilepath);
    if (why) {
      log.info(`configuration requires updates, (re)writing CNI config file at "${this.cniConfigFilepath}": ${why}`);
      try {
        this.cniConfigFilepath = await createCNIConfigFile(this.cfg, signal);
      } catch (e) {
        if (signal.aborted) throw e;
        installs.inc({ result: RESULT.createCNIConfigFailure });
        throw new InstallError(`create CNI config file: ${(e as Error).message}`);
      }
    } else {
      log.info(`valid mesh config present in node-level CNI file ${this.cniConfigFilepath}, not modifying`);
    }
    return copied;
  }

  /** Installs, then keeps the installation in place until the signal aborts (rejects with its reason). */
  async run(signal: AbortSignal): Promise<void> {
    const installedBins = await this.installAll(signal);
    log.info('initial installation complete, start watching for re-installation');
    const throttle = new InstallationThrottle(this);
    for (;;) {
      await throttle.throttle(signal);
      await this.sleepWatchInstall(signal, installedBins);
      log.info('detected changes to the node-level CNI setup, checking to see if configs or binaries need redeploying');
      // Only the binaries of the first installation are watched and redeployed.
      await this.installAll(signal);
      log.info('mesh CNI configuration and binaries validated/reinstalled');
    }
  }

  /**
   * Ready while the configuration stays intact; returns at the first change to the net dir, the service
   * account or an installed binary (the watch is made before the check, so no change is missed).
   */
  async sleepWatchInstall(signal: AbortSignal, installedBins: readonly string[]): Promise<void> {
    const targets = [
      ...this.cfg.binaryTargetDirs.flatMap((d) => installedBins.map((b) => path.join(d, b))),
      this.cfg.mountedCNINetDir,
      this.cfg.serviceAccountPath,
    ];
    const watcher = new ChangeWatcher(targets);
    try {
      const why = checkValidCNIConfig(this.cfg, this.cniConfigFilepath);
      if (why) {
        log.info(`installed CNI configuration is not valid: ${why}`);
        return;
      }
      this.readiness.set(true);
      installs.inc({ result: RESULT.success });
      const changed = await watcher.wait(signal);
      log.info(`file modified: ${changed}`);
    } finally {
      this.readiness.set(false);
      watcher.close();
    }
  }

  /** Removes the plugin's entry (or file), its client configuration and its binary. */
  async cleanup(): Promise<void> {
    log.info('cleaning up CNI installation');
    if (this.cniConfigFilepath !== '') await removeCNIConfigFile(this.cfg.chainedCNIPlugin, this.cniConfigFilepath);
    if (existsSync(this.kubeconfigFilepath)) {
      log.info(`removing mesh CNI kubeconfig file: ${this.kubeconfigFilepath}`);
      await rm(this.kubeconfigFilepath);
    }
    for (const dir of this.cfg.binaryTargetDirs) {
      const bin = path.join(dir, PLUGIN_TYPE);
      if (existsSync(bin)) {
        log.info(`removing binary: ${bin}`);
        await rm(bin);
      }
    }
  }
}
