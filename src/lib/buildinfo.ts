// Build information stamped by build.mjs (esbuild `define`); when running from source, read at start.
export interface BuildInfo {
  version: string;
  revision: string;
  /** Istio reports the Go runtime here; we report the Node.js runtime under the same key. */
  golang_version: string;
  status: 'Clean' | 'Modified' | 'unknown';
  tag: string;
}

declare const __MESH_BUILD__: Omit<BuildInfo, 'golang_version'> | undefined;

export function buildInfo(): BuildInfo {
  const stamped = typeof __MESH_BUILD__ !== 'undefined' ? __MESH_BUILD__ : undefined;
  const base = stamped ?? { version: '1.26.0-dev', revision: 'unknown', status: 'unknown' as const, tag: 'unknown' };
  // Key order is Istio's struct order, which its JSON output follows.
  return {
    version: base.version,
    revision: base.revision,
    golang_version: `node${process.versions.node}`,
    status: base.status,
    tag: base.tag,
  };
}

/** Go's %#v of Istio's version.BuildInfo. */
export function longForm(b: BuildInfo): string {
  return (
    `version.BuildInfo{Version:${JSON.stringify(b.version)}, GitRevision:${JSON.stringify(b.revision)}, ` +
    `GolangVersion:${JSON.stringify(b.golang_version)}, BuildStatus:${JSON.stringify(b.status)}, GitTag:${JSON.stringify(b.tag)}}`
  );
}
