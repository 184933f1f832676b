export const ADDON_SOURCE: string;
export const MEMORY_SOURCE: string;
export function buildOriginalDstAddon(out: string): { ok: true; note?: string } | { ok: false; reason: string };
