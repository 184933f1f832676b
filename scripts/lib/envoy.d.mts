export function envoyBinary(root?: string): string | undefined;
export function envoyMissing(): string | undefined;
