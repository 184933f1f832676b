// Conformance §1–§9 and §11 of ../shared/conformance/cni/cases.yaml against the installer's and the
// repair filter's functions, case by case, as Istio's own unit tests run them. (The built install-cni
// and the repair actions are exercised end to end in install-cni.test.ts and repair.test.ts.)
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { copyBinaries, sourcesInDir } from '../../src/cni/install/binaries';
import {
  checkValidCNIConfig,
  createCNIConfigFile,
  getCNIConfigFilepath,
  getDefaultCNINetwork,
  insertCNIConfig,
  type CniConfigSettings,
} from '../../src/cni/install/cniconfig';
import { Installer, Readiness, type InstallConfig } from '../../src/cni/install/installer';
import { createKubeconfig, writeKubeconfigFile } from '../../src/cni/install/kubeconfig';
import { matchesFilter, type PodLike, type RepairFilter } from '../../src/cni/repair/filter';
import { cases, INSTALL_DATA, installFile, repairPodCase } from './conformance';

// The counts ../shared/conformance/README.md gives: a case lost from the data (or a section renamed) fails here
// instead of silently running fewer cases.
t.test('cases.yaml holds every case: 51 install, 9 plugin, 17 repair', async (t) => {
  const n = (k: string) => (cases[k] as unknown[]).length;
  const install = [
    'defaultNetwork',
    'configFilepath',
    'insertConfig',
    'createConfigFile',
    'checkInstall',
    'sleepWatchInstall',
    'cleanup',
    'orchconfig',
    'copyBinaries',
  ];
  t.equal(
    install.reduce((sum, k) => sum + n(k), 0),
    51,
    'install cases',
  );
  t.equal(n('plugin'), 9, 'plugin dry-run cases');
  t.equal(n('repairFilter') + n('repairLabel') + n('repairDelete'), 17, 'repair cases');
});

const tempDir = (prefix = 'mesh-cni-conf-') => mkdtempSync(path.join(tmpdir(), prefix));
const copyIn = (dir: string, files: Record<string, string> = {}) => {
  for (const [src, dst] of Object.entries(files)) copyFileSync(path.join(INSTALL_DATA, src), path.join(dir, dst));
};

/** Resolves with the value, or `pending` when the promise has not settled within `ms`. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const r = await Promise.race([p, new Promise<'pending'>((res) => (timer = setTimeout(() => res('pending'), ms)))]);
  clearTimeout(timer);
  return r;
}

const MESH_PLUGIN = `{
  "cniVersion": "0.3.1",
  "name": "mesh-cni",
  "type": "mesh-cni"
}`;

t.test('§1 default CNI network of a directory (kubelet rule)', async (t) => {
  const shared = tempDir();
  for (const c of cases.defaultNetwork) {
    const dir = c.dir === 'shared' ? shared : c.dir;
    for (const [name, what] of Object.entries((c.write ?? {}) as Record<string, string>)) {
      writeFileSync(path.join(dir, name), what === 'mesh-plugin' ? MESH_PLUGIN : what);
    }
    if (c.expect === 'error') t.throws(() => getDefaultCNINetwork(dir), c.name);
    else t.equal(getDefaultCNINetwork(dir), c.expect, c.name);
  }
});

t.test('§2 which file the installer writes (chained waits for one)', async (t) => {
  for (const c of cases.configFilepath) {
    await t.test(c.name, async (t) => {
      const dir = tempDir();
      for (const f of c.existing ?? []) copyIn(dir, { [f]: f });
      const abort = new AbortController();
      t.teardown(() => abort.abort());
      const settings = { mountedCNINetDir: dir, cniConfName: c.cniConfName ?? '', chainedCNIPlugin: c.chained };
      const p = getCNIConfigFilepath(settings, abort.signal);
      p.catch(() => {});
      if (c.delayed) setTimeout(() => copyIn(dir, { [c.delayed]: c.delayed }), 250);
      const got = await within(p, c.delayed ? 2000 : 250);
      if (c.expect === null) t.equal(got, 'pending', 'still waiting after 250 ms');
      else t.equal(got, path.join(dir, c.expect));
    });
  }
});

t.test('§3 merging the plugin entry into an existing configuration', async (t) => {
  for (const c of cases.insertConfig) {
    const run = () => insertCNIConfig(installFile(c.new), installFile(c.existing));
    if (c.expect === 'error') t.throws(run, c.name);
    else t.equal(run().trim(), installFile(c.golden).trim(), c.name);
  }
});

const baseSettings = (dir: string, c: { chained: boolean; cniConfName?: string }): CniConfigSettings => ({
  mountedCNINetDir: dir,
  cniConfName: c.cniConfName ?? '',
  chainedCNIPlugin: c.chained,
  pluginLogLevel: cases.createConfigFileBase.pluginLogLevel,
  cniAgentRunDir: cases.createConfigFileBase.cniAgentRunDir,
  ambientEnabled: cases.createConfigFileBase.ambientEnabled,
  excludeNamespaces: cases.createConfigFileBase.excludeNamespaces,
  podNamespace: cases.createConfigFileBase.podNamespace,
});

t.test('§4 writing the CNI configuration end to end', async (t) => {
  for (const c of cases.createConfigFile) {
    await t.test(c.name, async (t) => {
      const dir = tempDir();
      copyIn(dir, c.existing);
      const before = Object.fromEntries(readdirSync(dir).map((n) => [n, readFileSync(path.join(dir, n), 'utf8')]));
      const abort = new AbortController();
      t.teardown(() => abort.abort());
      const p = createCNIConfigFile(baseSettings(dir, c), abort.signal);
      p.catch(() => {});
      const got = await within(p, c.expect === null ? 100 : 2000);
      if (c.expect === null) {
        t.equal(got, 'pending', 'times out waiting');
        t.same(Object.fromEntries(readdirSync(dir).map((n) => [n, readFileSync(path.join(dir, n), 'utf8')])), before, 'nothing written');
        return;
      }
      t.equal(got, path.join(dir, c.expect));
      t.equal(readFileSync(path.join(dir, c.expect), 'utf8'), installFile(c.golden), `bytes equal ${c.golden}`);
      t.equal(statSync(path.join(dir, c.expect)).mode & 0o777, 0o644, 'written 0644');
    });
  }
});

t.test('§5 is the installed configuration still valid', async (t) => {
  for (const c of cases.checkInstall) {
    const dir = tempDir();
    copyIn(dir, c.existing);
    const why = checkValidCNIConfig({ mountedCNINetDir: dir, cniConfName: c.cniConfName ?? '', chainedCNIPlugin: c.chained }, path.join(dir, c.file));
    if (c.expect === 'valid') t.equal(why, undefined, c.name);
    else t.type(why, 'string', `${c.name}: ${why}`);
  }
});

function installConfig(dir: string, extra: Partial<InstallConfig> & { chained: boolean }): InstallConfig {
  return {
    ...baseSettings(dir, { chained: extra.chained, cniConfName: extra.cniConfName }),
    serviceHost: '10.96.0.1',
    servicePort: '443',
    serviceProtocol: '',
    orchCAFile: '',
    skipTLSVerify: true,
    serviceAccountPath: '',
    orchconfigMode: 0o600,
    binarySources: [],
    binaryTargetDirs: [],
    ...extra,
  };
}

t.test('§6 readiness while watching', async (t) => {
  for (const c of cases.sleepWatchInstall) {
    await t.test(c.name, async (t) => {
      const dir = tempDir();
      const readiness = new Readiness();
      const installer = new Installer(installConfig(dir, { chained: c.chained }), readiness);
      installer.cniConfigFilepath = path.join(dir, c.file);
      const abort = new AbortController();
      t.teardown(() => abort.abort());
      let watching: Promise<void> | undefined;
      const start = () => {
        watching = installer.sleepWatchInstall(abort.signal, []);
        watching.catch(() => {});
      };
      for (const step of c.steps) {
        if (step.copy) copyIn(dir, step.copy);
        if (step.remove) rmSync(path.join(dir, step.remove));
        if (step.restart) start();
        if (!step.expect) continue;
        const e = step.expect;
        if (e.returns === 'immediately') {
          start();
          t.not(await within(watching!, 1000), 'pending', 'returns at once');
          t.equal(readiness.get(), false, 'not ready');
          watching = undefined;
        } else if (e.returns === 'no') {
          if (!watching) start();
          const deadline = Date.now() + 5000;
          while (!readiness.get() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
          t.equal(readiness.get(), true, 'becomes ready');
          t.equal(await within(watching!, 300), 'pending', 'stays in the watch');
        } else {
          t.not(await within(watching!, 5000), 'pending', 'returns after the change');
          t.equal(readiness.get(), false, 'not ready after returning');
          watching = undefined;
        }
      }
    });
  }
});

t.test('§7 uninstall', async (t) => {
  for (const c of cases.cleanup) {
    await t.test(c.name, async (t) => {
      const dir = tempDir();
      const binDir = tempDir('mesh-cni-bin-');
      const runDir = tempDir('mesh-cni-run-');
      copyIn(dir, c.existing);
      for (const b of c.binaries) writeFileSync(path.join(binDir, b), 'binary');
      writeFileSync(path.join(runDir, 'mesh-cni-kubeconfig'), 'kubeconfig');
      const installer = new Installer(
        installConfig(dir, { chained: c.chained, cniAgentRunDir: runDir, binaryTargetDirs: [binDir] }),
        new Readiness(),
      );
      installer.cniConfigFilepath = path.join(dir, c.file);
      await installer.cleanup();
      if (c.expectDeleted) t.notOk(existsSync(path.join(dir, c.file)), 'standalone file deleted');
      else t.equal(readFileSync(path.join(dir, c.file), 'utf8').trim(), installFile(c.golden).trim(), `equals ${c.golden}`);
      t.notOk(existsSync(path.join(runDir, 'mesh-cni-kubeconfig')), 'client configuration deleted');
      for (const b of c.binaries) t.notOk(existsSync(path.join(binDir, b)), `binary ${b} deleted`);
    });
  }
});

t.test('§8 the plugin client configuration', async (t) => {
  const sa = tempDir('mesh-cni-sa-');
  writeFileSync(path.join(sa, 'token'), 'service_account_token_string');
  const runDir = tempDir('mesh-cni-run-');
  for (const c of cases.orchconfig) {
    const s = {
      serviceHost: c.serviceHost ?? '',
      servicePort: c.servicePort ?? '',
      serviceProtocol: '',
      orchCAFile: c.orchCAFile ? path.join(INSTALL_DATA, c.orchCAFile) : '',
      skipTLSVerify: c.skipTLSVerify ?? false,
      serviceAccountPath: sa,
    };
    if (c.expect === 'error') {
      await t.rejects(createKubeconfig(s), /KUBERNETES_SERVICE_(HOST|PORT) not set\. Is this not running within a pod\?/, c.name);
      continue;
    }
    const file = await writeKubeconfigFile(s, runDir, 384);
    t.equal(readFileSync(file, 'utf8').trim(), installFile(c.golden).trim(), c.name);
    t.equal(statSync(file).mode & 0o777, 0o600, `${c.name}: --orchconfig-mode 384`);
  }
});

t.test('§9 copying plugin binaries', async (t) => {
  for (const c of cases.copyBinaries) {
    await t.test(c.name, async (t) => {
      const src = tempDir('mesh-cni-src-');
      const dst = tempDir('mesh-cni-dst-');
      for (const [n, content] of Object.entries(c.src as Record<string, string>)) {
        writeFileSync(path.join(src, n), content);
        chmodSync(path.join(src, n), 0o755);
      }
      for (const [n, content] of Object.entries((c.existing ?? {}) as Record<string, string>)) writeFileSync(path.join(dst, n), content);
      const copied = await copyBinaries(sourcesInDir(src), [dst]);
      t.same(copied.sort(), Object.keys(c.src).sort(), 'the copied names');
      for (const [n, content] of Object.entries((c.expect ?? {}) as Record<string, string>)) {
        t.equal(readFileSync(path.join(dst, n), 'utf8'), content, n);
        t.equal(statSync(path.join(dst, n)).mode & 0o777, 0o755, `${n} keeps its mode`);
      }
      for (const n of c.expectAbsent ?? []) t.notOk(existsSync(path.join(dst, n)), `${n} removed`);
    });
  }
});

/** The pods of §11: the named ones, or detect(name, message, code). */
function repairPod(spec: string): PodLike {
  const p = repairPodCase(spec);
  return {
    metadata: { name: spec, namespace: 'default', annotations: p.annotations, labels: p.labels },
    status: { initContainerStatuses: [p.initContainerStatus] },
  };
}

t.test('§11 race repair: which pods are broken', async (t) => {
  for (const c of cases.repairFilter) {
    const f: RepairFilter = { sidecarAnnotation: '', initContainerName: '', initExitCode: 0, initTerminationMsg: '', ...c.config };
    t.equal(matchesFilter(f, repairPod(c.pod)), c.want, c.name);
  }
});
