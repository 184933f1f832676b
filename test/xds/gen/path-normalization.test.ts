// meshConfig.pathNormalization → the HttpConnectionManager fields, as Istio's buildHTTPConnectionManager
// (pilot/pkg/networking/core/listener.go) sets them: NONE normalize_path false; BASE and DEFAULT
// normalize_path true; MERGE_SLASHES adds merge_slashes; DECODE_AND_MERGE_SLASHES adds
// UNESCAPE_AND_FORWARD; every other case keeps escaped slashes unchanged.
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { parseMeshConfig } from '../../../src/config/meshconfig';
import {
  HttpConnectionManagerSchema,
  HttpConnectionManager_PathWithEscapedSlashesAction as Escaped,
} from '../../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { pathNormalizationFields } from '../../../src/xds/gen/filters';

t.test('the mesh config names the setting; a bad one is an error naming the field', async (t) => {
  t.equal(parseMeshConfig('', 'mesh').pathNormalization, 'BASE', 'unset is BASE');
  t.equal(parseMeshConfig('pathNormalization: {normalization: DEFAULT}', 'mesh').pathNormalization, 'BASE');
  for (const n of ['NONE', 'BASE', 'MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES']) {
    t.equal(parseMeshConfig(`pathNormalization:\n  normalization: ${n}\n`, 'mesh').pathNormalization, n);
  }
  t.throws(
    () => parseMeshConfig('pathNormalization: {normalization: MERGE}', '/etc/mesh'),
    /mesh config \/etc\/mesh: pathNormalization\.normalization: invalid value "MERGE"/,
  );
});

t.test('each setting gives the HCM fields Istio gives', async (t) => {
  const hcm = (n: Parameters<typeof pathNormalizationFields>[0]) => {
    const h = create(HttpConnectionManagerSchema, pathNormalizationFields(n));
    return { normalize: h.normalizePath, merge: h.mergeSlashes, escaped: h.pathWithEscapedSlashesAction };
  };
  t.same(hcm('NONE'), { normalize: false, merge: false, escaped: Escaped.KEEP_UNCHANGED });
  t.same(hcm('BASE'), { normalize: true, merge: false, escaped: Escaped.KEEP_UNCHANGED });
  t.same(hcm('MERGE_SLASHES'), { normalize: true, merge: true, escaped: Escaped.KEEP_UNCHANGED });
  t.same(hcm('DECODE_AND_MERGE_SLASHES'), { normalize: true, merge: true, escaped: Escaped.UNESCAPE_AND_FORWARD });
});
