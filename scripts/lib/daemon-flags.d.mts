export function ephemeralListeners(...pinned: string[]): string[];
