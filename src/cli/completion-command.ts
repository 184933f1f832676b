// `completion <shell>`: prints the script for that shell.
import { flagBool, type Handler } from './context';
import { bashScript, fishScript, powershellScript, zshScript } from './completion-scripts';

const SCRIPTS = { bash: bashScript, fish: fishScript, powershell: powershellScript, zsh: zshScript } as const;

export const run: Handler = async (ctx) => {
  const shell = ctx.path[ctx.path.length - 1] as keyof typeof SCRIPTS;
  ctx.stdout.write(SCRIPTS[shell](ctx.program.name, !flagBool(ctx, 'no-descriptions')));
  return 0;
};
