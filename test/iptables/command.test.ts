// The mesh-iptables handler end to end, without privileges: dry runs from flags to the golden
// command lists, DRY_RUN_FILE_PATH, and user-facing errors.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { CommandError } from '../../src/cli/context';
import { runMeshIptables } from '../../src/iptables/command';
import type { CaptureFacts } from '../../src/iptables/config';
import { RealDependencies } from '../../src/iptables/executor';
import { golden, runContext, specFlagDefaults } from './helpers';
import { freePort } from '../helpers/ports';
import { tempDir } from '../helpers/temp';

const defaults = specFlagDefaults();
const ipv4Pod: CaptureFacts = { localAddresses: ['127.0.0.1', '10.0.0.5'], nameservers: ['127.0.0.53'], users: {} };
const ipv6Pod: CaptureFacts = { localAddresses: ['::1', 'fd00::5'], nameservers: ['127.0.0.53'], users: {} };
const withFacts = (facts: CaptureFacts) => ({ facts: async () => facts });

t.test('the spec flag table is fully read', async (t) => {
  t.equal(Object.keys(defaults).length, 30);
  t.equal(defaults['proxy-port'], '15001');
  t.equal(defaults['probe-timeout'], 5000);
  t.equal(defaults['iptables-probe-port'], 15002);
});

t.test('--dry-run with default flags prints the commands of the "empty" case', async (t) => {
  const dir = tempDir(t, 'mesh-ipt-');
  const file = path.join(dir, 'dry-run.txt');
  const run = runContext({ ...defaults, 'dry-run': true }, { DRY_RUN_FILE_PATH: file });
  t.equal(await runMeshIptables(run.ctx, withFacts(ipv4Pod)), 0);
  t.equal(run.stdout().trim(), golden('empty').trim());
  t.equal(readFileSync(file, 'utf8').trim(), golden('empty').trim(), 'DRY_RUN_FILE_PATH gets the same lines');
});

t.test('--dry-run maps every flag of the "tproxy" case onto the golden output', async (t) => {
  const run = runContext({
    ...defaults,
    'dry-run': true,
    'mesh-inbound-interception-mode': 'TPROXY',
    'mesh-inbound-ports': '*',
    'mesh-service-exclude-cidr': '1.1.0.0/16',
    'mesh-service-cidr': '9.9.0.0/16',
    'redirect-dns': true,
    'proxy-uid': '1337',
    'proxy-gid': '1337',
    'mesh-exclude-interfaces': 'not-mesh-nic',
  });
  // An IPv6 pod address turns on ip6tables; the resolver 127.0.0.53 is IPv4 only, as in the case.
  await runMeshIptables(run.ctx, withFacts(ipv6Pod));
  t.equal(run.stdout().trim(), golden('tproxy').trim());
});

t.test('--dry-run with owner groups and the loopback range from the environment', async (t) => {
  const run = runContext({ ...defaults, 'dry-run': true }, { MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE: '888,ftp' });
  await runMeshIptables(run.ctx, withFacts(ipv4Pod));
  t.equal(run.stdout().trim(), golden('outbound-owner-groups-exclude').trim());

  const cidr = runContext({ ...defaults, 'dry-run': true }, { MESH_OUTBOUND_IPV4_LOOPBACK_CIDR: '127.0.0.1/8' });
  await runMeshIptables(cidr.ctx, withFacts(ipv4Pod));
  t.equal(cidr.stdout().trim(), golden('host-ipv4-loopback-cidr').trim());
});

t.test('--skip-rule-apply records nothing', async (t) => {
  const run = runContext({ ...defaults, 'dry-run': true, 'skip-rule-apply': true });
  t.equal(await runMeshIptables(run.ctx, withFacts(ipv4Pod)), 0);
  t.equal(run.stdout(), '');
});

t.test('invalid flags are user errors naming the flag', async (t) => {
  const run = runContext({ ...defaults, 'dry-run': true, 'mesh-service-cidr': '10.0.0.0/40' });
  const err = await runMeshIptables(run.ctx, withFacts(ipv4Pod)).catch((e: unknown) => e);
  t.type(err, CommandError);
  t.match((err as Error).message, /--mesh-service-cidr/);
  t.equal((err as CommandError).exitCode, undefined, 'the program exit code applies');
});

t.test('missing iptables binaries are a clear user error', async (t) => {
  const empty = tempDir(t, 'mesh-ipt-path-');
  const run = runContext({ ...defaults });
  const err = await runMeshIptables(run.ctx, {
    ...withFacts(ipv4Pod),
    dependencies: () => new RealDependencies({ env: { PATH: empty } }),
  }).catch((e: unknown) => e);
  t.type(err, CommandError);
  t.match((err as Error).message, /iptables.*not found in PATH/);
});

t.test('--run-validation cannot target another namespace', async (t) => {
  const run = runContext({ ...defaults, 'run-validation': true, 'skip-rule-apply': true, 'network-namespace': 'elsewhere' });
  await t.rejects(runMeshIptables(run.ctx, withFacts(ipv4Pod)), /--run-validation.*--network-namespace/);
});

t.test('--run-validation without capture rules fails with exit code 126 within the probe timeout', async (t) => {
  const [proxy, inbound, probe] = [await freePort(), await freePort(), await freePort()];
  // Validation only (no rules applied), with the given probe timeout in ms.
  const validationOnly = (probeTimeout: number) => ({
    ...defaults,
    'skip-rule-apply': true,
    'run-validation': true,
    'proxy-port': String(proxy),
    'inbound-capture-port': String(inbound),
    'iptables-probe-port': probe,
    'probe-timeout': probeTimeout,
  });
  const run = runContext(validationOnly(300));
  // A termination log as the orchestrator mounts it in every container (empty, owned by the container).
  const termDir = mkdtempSync(path.join(os.tmpdir(), 'mesh-term-'));
  const terminationLog = path.join(termDir, 'termination-log');
  writeFileSync(terminationLog, '');
  const started = Date.now();
  const err = await runMeshIptables(run.ctx, { ...withFacts(ipv4Pod), terminationLog }).catch((e: unknown) => e);
  t.type(err, CommandError);
  t.equal((err as CommandError).exitCode, 126);
  // Istio's message (istio-iptables root.go), renamed: repair's --repair-init-container-termination-message matches it.
  const istio =
    'iptables validation failed; workload is not ready for Mesh.\n' +
    'When using Mesh CNI, this can occur if a pod is scheduled before the node is ready.\n\n' +
    "If installed with 'cni.repair.deletePods=true', this pod should automatically be deleted and retry.\n" +
    'Otherwise, this pod will need to be manually removed so that it is scheduled on a node with mesh-cni running, allowing iptables rules to be established.\n';
  t.equal((err as Error).message, istio.trimEnd());
  t.equal(readFileSync(terminationLog, 'utf8'), istio, 'the termination message is written to the termination log');
  t.match(run.stderr(), new RegExp(`127\\.0\\.0\\.6:${probe} was not redirected`), 'the probe detail is logged');
  t.ok(Date.now() - started < 5000, 'gives up after the timeout');

  // Outside a container there is no termination log, and none is created.
  const absent = path.join(termDir, 'absent');
  await runMeshIptables(runContext(validationOnly(100)).ctx, { ...withFacts(ipv4Pod), terminationLog: absent }).catch(() => {});
  t.notOk(existsSync(absent), 'no termination log is created where there is none');
});
