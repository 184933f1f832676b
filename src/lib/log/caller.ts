// Caller and stack capture from V8 stack traces. Frames of the logging library are cut off with
// Error.captureStackTrace(holder, publicMethod), which also works inside a single-file bundle where file
// names cannot tell library frames from user frames. Only called when a scope asks for it.

type AnyFunction = Function;

interface Frame {
  fn: string;
  file: string;
  line: string;
}

const MAX_STACK_FRAMES = 64;

function rawStack(above: AnyFunction, limit: number): string {
  const holder: { stack?: string } = {};
  const saved = Error.stackTraceLimit;
  Error.stackTraceLimit = limit;
  try {
    Error.captureStackTrace(holder, above);
  } finally {
    Error.stackTraceLimit = saved;
  }
  return holder.stack ?? '';
}

const LOCATION = /^(.*):(\d+):(\d+)$/;

function parseFrame(text: string): Frame | undefined {
  let s = text.trim();
  if (!s.startsWith('at ')) return undefined;
  s = s.slice(3);
  let fn = '';
  let loc = s;
  if (s.endsWith(')')) {
    const open = s.indexOf(' (');
    if (open >= 0) {
      fn = s.slice(0, open);
      loc = s.slice(open + 2, -1);
    }
  }
  const m = LOCATION.exec(loc);
  if (!m) return undefined;
  let file = m[1] as string;
  if (file.startsWith('file://')) {
    try {
      file = decodeURIComponent(new URL(file).pathname);
    } catch {
      file = file.slice('file://'.length);
    }
  }
  return { fn, file, line: m[2] as string };
}

function frames(above: AnyFunction, limit: number): Frame[] {
  const out: Frame[] = [];
  const lines = rawStack(above, limit).split('\n');
  for (let i = 1; i < lines.length; i++) {
    const f = parseFrame(lines[i] as string);
    if (f) out.push(f);
  }
  return out;
}

/** zap's ShortCallerEncoder: the last directory and the file name, `dir/file.ts:123`. */
export function shortCaller(file: string, line: string | number): string {
  const last = file.lastIndexOf('/');
  if (last <= 0) return `${file}:${line}`;
  const prev = file.lastIndexOf('/', last - 1);
  return `${prev < 0 ? file : file.slice(prev + 1)}:${line}`;
}

/** Short caller location of the code that called `above` (skipping `skip` more frames), or undefined. */
export function captureCaller(above: AnyFunction, skip = 0): string | undefined {
  const fs = frames(above, skip + 1);
  const f = fs[skip];
  return f ? shortCaller(f.file, f.line) : undefined;
}

/** Stack of the code that called `above`, one `function\n\tfile:line` pair per frame like zap's stacks. */
export function captureStack(above: AnyFunction, skip = 0): string {
  const fs = frames(above, skip + MAX_STACK_FRAMES).slice(skip);
  return fs.map((f) => `${f.fn || '<anonymous>'}\n\t${f.file}:${f.line}`).join('\n');
}
