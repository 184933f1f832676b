// `meshctl options` (istioctl 1.26 istioctl/cmd/options.go): the flags every command accepts, one per line in
// istioctl's shape `  -i, --name: usage` (three spaces where a flag has no shorthand), in pflag's order (by name).
// Differs on purpose: istioctl lists only its log flags, which meshctl does not have; meshctl lists its global
// flags (the specification's §4.1), which is what "global options" means for it.
import type { Handler } from '../cli/context';

export const run: Handler = async (ctx) => {
  const flags = [...(ctx.program.root.persistentFlags ?? [])]
    .filter((f) => !f.hidden)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  let out = 'The following options can be passed to any command:\n';
  for (const f of flags) out += `  ${f.short ? `-${f.short},` : '   '} --${f.name}: ${f.help}\n`;
  ctx.stdout.write(out);
  return 0;
};
