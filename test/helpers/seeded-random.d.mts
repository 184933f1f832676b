export function seededRandom(seed: number): () => number;
export function mutate(base: Buffer, random: () => number): Buffer;
