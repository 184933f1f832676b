// Which pods the race repair treats as broken (Istio's cni/pkg/repair matchesFilter): pods with the
// sidecar annotation whose validation init container crash-loops with the configured exit code and
// termination message, that is, pods that started before the CNI plugin was on their node.

export interface RepairFilter {
  /** --repair-sidecar-annotation; "" checks every pod. */
  sidecarAnnotation: string;
  /** --repair-init-container-name; "" checks every init container. */
  initContainerName: string;
  /** --repair-init-container-exit-code; 0 accepts any. */
  initExitCode: number;
  /** --repair-init-container-termination-message; "" accepts any (both sides trimmed). */
  initTerminationMsg: string;
}

interface Terminated {
  exitCode?: number;
  reason?: string;
  message?: string;
}
interface ContainerStatus {
  name?: string;
  state?: { terminated?: Terminated | null } | null;
  lastState?: { terminated?: Terminated | null } | null;
}
export interface PodLike {
  metadata?: { name?: string; namespace?: string; annotations?: Record<string, string> | null; labels?: Record<string, string> | null };
  status?: { initContainerStatuses?: ContainerStatus[] | null } | null;
}

export function matchesFilter(f: RepairFilter, pod: PodLike): boolean {
  const wantMsg = f.initTerminationMsg.trim();
  const matches = (t: Terminated) =>
    (wantMsg === '' || wantMsg === (t.message ?? '').trim()) && (f.initExitCode === 0 || f.initExitCode === (t.exitCode ?? 0));

  if (f.sidecarAnnotation !== '' && !(f.sidecarAnnotation in (pod.metadata?.annotations ?? {}))) return false;
  for (const c of pod.status?.initContainerStatuses ?? []) {
    if (f.initContainerName !== '' && c.name !== f.initContainerName) continue;
    // A container that completed is never broken, whatever it went through before.
    const now = c.state?.terminated;
    if (now && (now.reason === 'Completed' || (now.exitCode ?? 0) === 0)) continue;
    const last = c.lastState?.terminated;
    if (last && matches(last)) return true;
  }
  return false;
}
