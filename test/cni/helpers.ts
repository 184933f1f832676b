// How the CNI tests run the product: the single executable (dist/mesh), or with MESH_TEST_BUNDLE=1 the
// bundle under node (dist/mesh.cjs, rebuilt in seconds while iterating).
import path from 'node:path';
import { DIST, MESH } from '../helpers/binary';

const bundle = process.env.MESH_TEST_BUNDLE === '1';

/** `mesh cni-plugin`. */
export const CNI_BIN = bundle
  ? { file: process.execPath, args: [path.join(DIST, 'mesh.cjs'), 'cni-plugin'] as const }
  : { file: MESH, args: ['cni-plugin'] as const };

/** `install-cni`. */
export const INSTALL_CNI = bundle
  ? { file: process.execPath, args: [path.join(DIST, 'mesh.cjs'), 'cni'] as const }
  : { file: MESH, args: ['cni'] as const };
