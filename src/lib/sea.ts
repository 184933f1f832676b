// Whether this process is the packaged single executable (Node's SEA), where process.execPath is the
// mesh binary itself rather than a Node runtime running a script, and the assets built into it.

/** The parts of node:sea we use. */
export interface SeaAssets {
  getAsset(key: string): ArrayBuffer;
  getAsset(key: string, encoding: string): string;
}

let cached: SeaAssets | null | undefined;

/** node:sea when this process is the single executable, else undefined (a plain `node`, or no node:sea). */
export function seaAssets(): SeaAssets | undefined {
  if (cached === undefined) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const s = require('node:sea') as SeaAssets & { isSea(): boolean };
      cached = s.isSea() ? s : null;
    } catch {
      cached = null;
    }
  }
  return cached ?? undefined;
}

export function isSea(): boolean {
  return seaAssets() !== undefined;
}
