// The error of a mesh config file that cannot be used (its own file: the mesh config parsers share it).
export class MeshConfigError extends Error {
  override name = 'MeshConfigError';
}
