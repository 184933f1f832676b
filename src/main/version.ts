// `version` for every program, with the output shapes of Istio's pkg/version command.
import { CommandError, flagBool, flagString, type Handler } from '../cli/context';
import { buildInfo, longForm } from '../lib/buildinfo';

export const run: Handler = async (ctx) => {
  // meshctl with a control plane address configured (MESHCTL_XDS_ADDRESS or $HOME/.meshctl/config.yaml) asks it.
  if (ctx.program.name === 'meshctl' && ctx.flags['remote'] === true) {
    const { xdsOptions } = await import('../meshctl/xds-options');
    if (xdsOptions(ctx).address) return (await import('../meshctl/version')).printVersion(ctx, true);
  }
  const output = flagString(ctx, 'output');
  if (output !== '' && output !== 'yaml' && output !== 'json') throw new CommandError(`--output must be 'yaml' or 'json'`);
  const info = buildInfo();
  const doc = { clientVersion: info };
  if (output === 'json') ctx.stdout.write(JSON.stringify(doc, null, 2) + '\n');
  else if (output === 'yaml') ctx.stdout.write((await import('../lib/goyaml')).jsonToGoYaml(doc));
  else ctx.stdout.write(`client version: ${flagBool(ctx, 'short') ? info.version : longForm(info)}\n`);
  if (ctx.program.name === 'meshctl' && ctx.flags['remote'] === true) {
    // Finding the control plane through the orchestrator is not in this build; say how to reach it directly.
    ctx.stderr.write(
      'control plane version: not queried: no control plane address (set MESHCTL_XDS_ADDRESS or xds-address in $HOME/.meshctl/config.yaml, ' +
        'or use `meshctl x version --xds-address`); use --remote=false to skip this check\n',
    );
  }
  return 0;
};
