// A yes/no question on stdout answered on stdin (istioctl's util.Confirm): only "y" or "yes" (any case)
// proceed; an empty answer or end of input means no.
import type { RunContext } from '../cli/context';

export function confirm(ctx: RunContext, prompt: string): Promise<boolean> {
  ctx.stdout.write(prompt + ' ');
  return new Promise((resolve) => {
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString();
      if (buf.includes('\n')) done();
    };
    const done = () => {
      process.stdin.off('data', onData);
      process.stdin.off('end', done);
      process.stdin.pause();
      resolve(/^y(es)?$/i.test(buf.trim()));
    };
    process.stdin.on('data', onData);
    process.stdin.on('end', done);
    process.stdin.resume();
  });
}
