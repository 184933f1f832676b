// CA_TRUSTED_NODE_ACCOUNTS (Istio's ClusterNodeAuthorizer): a node proxy running as one of these service
// accounts may ask for a certificate of another identity, but only one that a pod on its own node runs as.
// The caller is the pod its TokenReview named (same UID, same service account); the check reads the pods
// from the API server at the time of the request, so a pod that has just gone no longer counts.
import { parseSpiffeIdentity } from '../../lib/spiffe';
import type { OrchApi } from './orch-token';
import type { OrchCallerInfo } from './types';

/** Parses `ns/sa,ns/sa`; entries without a `/` are reported and skipped, as Istio does. */
export function parseTrustedNodeAccounts(text: string): { accounts: Set<string>; invalid: string[] } {
  const accounts = new Set<string>();
  const invalid: string[] = [];
  if (text === '') return { accounts, invalid };
  for (const v of text.split(',')) {
    const i = v.indexOf('/');
    if (i < 0) invalid.push(v);
    else accounts.add(`${v.slice(0, i)}/${v.slice(i + 1)}`);
  }
  return { accounts, invalid };
}

interface Pod {
  metadata?: { name?: string; namespace?: string; uid?: string };
  spec?: { nodeName?: string; serviceAccountName?: string };
}

export class NodeAuthorizer {
  constructor(
    private readonly api: OrchApi,
    readonly trusted: ReadonlySet<string>,
  ) {}

  /** Resolves when `caller` may impersonate `requested`; rejects with the reason (logged, never sent). */
  async authorize(caller: OrchCallerInfo | undefined, requested: string): Promise<void> {
    const who = caller
      ? `Pod{Name: ${caller.podName}, Namespace: ${caller.podNamespace}, UID: ${caller.podUid}, ServiceAccount: ${caller.podServiceAccount}}`
      : 'a caller without orchestrator credentials';
    if (!caller || !this.trusted.has(`${caller.podNamespace}/${caller.podServiceAccount}`))
      throw new Error(`caller (${who}) is not allowed to impersonate`);
    const id = parseSpiffeIdentity(requested);
    if (id instanceof Error) throw new Error(`failed to validate impersonated identity ${requested}`);
    let pod: Pod;
    try {
      pod = (await this.api.request(
        'GET',
        `/api/v1/namespaces/${encodeURIComponent(caller.podNamespace)}/pods/${encodeURIComponent(caller.podName)}`,
      )) as Pod;
    } catch {
      throw new Error(`pod ${caller.podNamespace}/${caller.podName} not found`);
    }
    if (pod.metadata?.uid !== caller.podUid) throw new Error(`pod found, but UID does not match: ${pod.metadata?.uid ?? ''} vs ${caller.podUid}`);
    if (pod.spec?.serviceAccountName !== caller.podServiceAccount) {
      throw new Error(`pod found, but ServiceAccount does not match: ${pod.spec?.serviceAccountName ?? ''} vs ${caller.podServiceAccount}`);
    }
    const node = pod.spec?.nodeName ?? '';
    if (!node) throw new Error(`pod ${caller.podNamespace}/${caller.podName} is not on a node`);
    const list = (await this.api.request('GET', `/api/v1/namespaces/${encodeURIComponent(id.namespace)}/pods`, {
      query: { fieldSelector: `spec.nodeName=${node},status.phase!=Failed` },
    })) as { items?: Pod[] };
    if (!(list.items ?? []).some((p) => p.spec?.serviceAccountName === id.serviceAccount)) {
      throw new Error(`no instances of "${id.namespace}/${id.serviceAccount}" found on node "${node}"`);
    }
  }
}
