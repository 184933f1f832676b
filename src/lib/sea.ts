// Whether this process is the packaged single executable (Node's SEA), where process.execPath is the
// mesh binary itself rather than a Node runtime running a script.
export function isSea(): boolean {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return (require('node:sea') as { isSea(): boolean }).isSea();
  } catch {
    return false;
  }
}
