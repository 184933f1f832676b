// Istio's CrdWatcher.WaitForCRD (pkg/kube/kclient/crdwatcher.go) for the Gateway API controllers: they start their
// informers only once the CRD is served, so a cluster without the Gateway API CRDs gets no failing list/watch loops.
// Differs on purpose: the CRD is polled (every 5 s) rather than watched; an answer other than 404 (no right to read
// CRDs) starts the controller at once, as before this check.
import { OrchApiError, type OrchClient } from '../orch/client';

/** Resolves true once the CRD `name` exists, false when `stopped()` turns true first. */
export async function waitForCrd(client: OrchClient, name: string, stopped: () => boolean, pollMs = 5000): Promise<boolean> {
  for (;;) {
    if (stopped()) return false;
    try {
      await client.getJson(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${encodeURIComponent(name)}`);
      return true;
    } catch (e) {
      if (!(e instanceof OrchApiError && e.statusCode === 404)) return !stopped();
    }
    await new Promise((r) => setTimeout(r, pollMs).unref());
  }
}
