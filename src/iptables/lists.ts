// Comma-separated settings (`80,443`, `eth0,eth1`, `6000,7000,`) are split the way Istio does:
// empty items vanish, so trailing commas are harmless.

export function splitList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}
