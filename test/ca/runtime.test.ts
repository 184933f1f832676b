// The CA's lifecycle against a store held in memory (what two replicas sharing the CA Secret see): first
// start creates the root, a second start and a losing creator use the stored one, and the rotator keeps,
// reloads (another replica rotated) or rotates — and tells subscribers.
import * as fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { MeshCa } from '../../src/ca/runtime';
import type { CaSettings } from '../../src/ca/settings';
import type { CaStore, StoredRoot } from '../../src/ca/store';
import { rotatedRoot } from '../../src/ca/selfsigned';
import { tempDir } from '../helpers/temp';

class MemoryStore implements CaStore {
  readonly describe = 'memory';
  root: StoredRoot | undefined;
  creates = 0;
  updates = 0;
  failLoad = false;
  /** Simulates a replica that stored a root between our load() and our create(). */
  raceWith: StoredRoot | undefined;
  async load() {
    if (this.failLoad) throw new Error('the API server is unavailable');
    return this.root;
  }
  async create(root: StoredRoot) {
    this.creates++;
    if (this.raceWith) {
      this.root = this.raceWith;
      this.raceWith = undefined;
      return false;
    }
    if (this.root) return false;
    this.root = root;
    return true;
  }
  async update(root: StoredRoot) {
    this.updates++;
    this.root = root;
  }
}

const H = 3_600_000;
function settings(dir: string, over: Partial<CaSettings> = {}): CaSettings {
  return {
    enabled: true,
    rootCaDir: path.join(dir, 'no-cacerts'),
    selfSignedCaTtlMs: 10 * H,
    rsaKeySize: 2048,
    rootCheckIntervalMs: 0,
    rootGracePercentile: 20,
    rootRotatorJitter: false,
    defaultWorkloadCertTtlMs: H,
    maxWorkloadCertTtlMs: 2 * H,
    useCacertsForSelfSigned: false,
    multiRoot: false,
    certProvider: 'istiod',
    externalCa: '',
    orchSigner: '',
    certSignerDomain: '',
    customHosts: [],
    rootConfigMap: 'mesh-ca-root-cert',
    tokenAudiences: ['mesh-ca'],
    tokenIssuer: '',
    audience: '',
    jwtRule: '',
    trustedGatewayCidrs: [],
    trustedNodeAccounts: '',
    xdsAuth: true,
    xdsAuthPlaintext: false,
    ...over,
  };
}

t.test('first start creates, later starts and losing creators reuse', async (t) => {
  const dir = tempDir(t);
  const store = new MemoryStore();
  const a = await MeshCa.start({ settings: settings(dir), trustDomain: 'td.example', store });
  t.teardown(() => a.close());
  t.equal(a.kind, 'self-signed');
  t.equal(store.creates, 1);
  t.equal(a.ca.bundle.signingCertPem, store.root!.certPem);
  const b = await MeshCa.start({ settings: settings(dir), trustDomain: 'td.example', store });
  t.teardown(() => b.close());
  t.equal(store.creates, 1, 'a second replica does not create');
  t.equal(b.ca.bundle.signingCertPem, a.ca.bundle.signingCertPem, 'and signs with the same root');

  const racing = new MemoryStore();
  racing.raceWith = store.root;
  const c = await MeshCa.start({ settings: settings(dir), trustDomain: 'td.example', store: racing });
  t.teardown(() => c.close());
  t.equal(c.ca.bundle.signingCertPem, store.root!.certPem, "a creator that lost the race uses the winner's root");

  fs.mkdirSync(path.join(dir, 'cacerts'));
  fs.writeFileSync(path.join(dir, 'cacerts', 'root-cert.pem'), store.root!.certPem);
  await t.rejects(MeshCa.start({ settings: settings(dir, { rootCaDir: path.join(dir, 'cacerts') }), trustDomain: 'td.example', store }), {
    message: /incomplete signing CA bundle detected: missing .*ca-key\.pem, .*ca-cert\.pem, .*cert-chain\.pem$/,
  });
});

t.test('the rotator: keep, reload what another replica stored, rotate in the grace period, survive store errors', async (t) => {
  const dir = tempDir(t);
  const store = new MemoryStore();
  let now = Date.now();
  const ca = await MeshCa.start({ settings: settings(dir, { rootGracePercentile: 50 }), trustDomain: 'td.example', store, now: () => now });
  t.teardown(() => ca.close());
  const changes: string[] = [];
  ca.onChange((b) => changes.push(b.signingCertPem));
  const first = store.root!;

  t.equal(await ca.checkAndRotate(), 'kept', 'early in its life the root stays');

  const byOther = rotatedRoot(first, { ttlMs: 10 * H, org: 'td.example', now: now - 1000 });
  store.root = { certPem: byOther, keyPem: first.keyPem };
  t.equal(await ca.checkAndRotate(), 'reloaded', 'another replica rotated: its root is taken over');
  t.equal(ca.ca.bundle.signingCertPem, byOther);
  t.same(changes, [byOther]);

  now += 6 * H; // past half of the 10 h lifetime
  t.equal(await ca.checkAndRotate(), 'rotated');
  t.equal(store.updates, 1, 'the new root is stored');
  t.not(store.root!.certPem, byOther);
  t.equal(store.root!.keyPem, first.keyPem, 'over the same key');
  t.equal(ca.ca.bundle.signingCertPem, store.root!.certPem, 'and used for signing');
  t.equal(changes.length, 2);

  store.failLoad = true;
  t.equal(await ca.checkAndRotate(), 'failed', 'a store that cannot be read skips the round');
  t.equal(ca.ca.bundle.signingCertPem, store.root!.certPem, 'signing continues with what it had');
});
