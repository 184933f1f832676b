// Shared by the meshctl tests that compare with istioctl's own output (fixtures/README): the renaming rule
// on the version labels istioctl prints (`Istio Version:` → `Mesh Version:`), the block re-aligned as
// istioctl's tabwriter (istioctl/pkg/writer/envoy/configdump) would align it.
import { TabWriter } from '../../src/lib/tabwriter';

/** The renaming rule applied to istioctl's version labels, the block re-aligned; other text unchanged. */
export function relabel(text: string): string {
  const lines = text.split('\n');
  const block = lines.filter((l) => /^(Istio Version|Istio Proxy Version|Envoy Version):/.test(l));
  if (block.length === 0) return text;
  const w = new TabWriter(0, 1);
  for (const l of block) {
    const m = /^([^:]+:)\s+(.*)$/.exec(l)!;
    w.row(m[1]!.replace(/^Istio /, 'Mesh '), m[2]!);
  }
  const fixed = w.flush().trimEnd().split('\n');
  return lines.map((l) => (block.includes(l) ? fixed[block.indexOf(l)]! : l)).join('\n');
}
