export const ADDON_SOURCE: string;
export function buildOriginalDstAddon(out: string): { ok: true } | { ok: false; reason: string };
