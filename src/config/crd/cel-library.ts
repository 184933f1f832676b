// The CEL environment of Kubernetes' CRD validation rules (k8s.io/apiserver/pkg/cel/environment: cel-go's standard
// library, its strings extension, and Kubernetes' own libraries) on @bufbuild/cel, limited to what Istio 1.26's
// CRD rules call. Kubernetes' URL library (k8s.io/apiserver/pkg/cel/library/urls.go) provides isURL(), url() and
// URL.getScheme(); the URL value is an opaque type there, here a message `kubernetes.URL`, so `url(x).scheme` also
// reads (Kubernetes' type checker would reject it; no Istio rule writes it).
// Two standard conversions are replaced to behave as cel-go does: int(string) takes only what Go's
// strconv.ParseInt accepts and duration(string) what time.ParseDuration accepts, failing with cel-go's
// `type conversion error from 'string' to ...` (Istio's CRD tests expect that text). `matches()` runs on the same
// RE2 port as every other configured regular expression.
import { celEnv, type CelEnv, celFunc, celMethod, CelScalar, objectType } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { create, createFileRegistry, createRegistry, type DescMessage } from '@bufbuild/protobuf';
import {
  type Duration,
  DurationSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
} from '@bufbuild/protobuf/wkt';
import { DurationError, parseDurationNs } from '../../lib/duration';
import { GoURLError, parseRequestURI, parseURL } from '../../lib/gourl';
import { searcher } from '../../lib/re2';

const URL_FIELDS = ['scheme', 'host', 'path', 'query'] as const;

function urlFile() {
  const field = (name: string, number: number) => ({
    name,
    number,
    jsonName: name,
    type: FieldDescriptorProto_Type.STRING,
    label: FieldDescriptorProto_Label.OPTIONAL,
  });
  const proto = create(FileDescriptorProtoSchema, {
    name: 'kubernetes/url.proto',
    package: 'kubernetes',
    syntax: 'proto3',
    messageType: [{ name: 'URL', field: URL_FIELDS.map((f, i) => field(f, i + 1)) }],
  });
  return createFileRegistry(proto, () => undefined);
}

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

/** strconv.ParseInt(s, 10, 64): an optional sign and decimal digits, within int64. */
function parseGoInt(s: string): bigint {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error("type conversion error from 'string' to 'int'");
  const n = BigInt(s);
  if (n < INT64_MIN || n > INT64_MAX) throw new Error("type conversion error from 'string' to 'int'");
  return n;
}

function goDuration(s: string): Duration {
  let ns: bigint;
  try {
    ns = parseDurationNs(s);
  } catch (e) {
    if (e instanceof DurationError) throw new Error("type conversion error from 'string' to 'google.protobuf.Duration'");
    throw e;
  }
  const seconds = ns / 1_000_000_000n;
  return create(DurationSchema, { seconds, nanos: Number(ns - seconds * 1_000_000_000n) });
}

/** The functions Kubernetes adds (or changes) in its CRD rule environment, as @bufbuild/cel functions. */
export function kubernetesCelFuncs(url: DescMessage) {
  const URL = objectType(url);
  const toUrl = (s: string) => {
    let u;
    try {
      // urls.go: ParseRequestURI decides (absolute URLs only), Parse gives the parts (it splits a fragment off).
      parseRequestURI(s);
      u = parseURL(s);
    } catch (e) {
      if (e instanceof GoURLError) throw new Error(`URL parse error during conversion from string: ${e.message}`);
      throw e;
    }
    return create(url, { scheme: u.scheme, host: u.host, path: u.path, query: u.rawQuery });
  };
  const isURL = (s: string): boolean => {
    try {
      parseRequestURI(s);
      return true;
    } catch (e) {
      if (e instanceof GoURLError) return false;
      throw e;
    }
  };
  return [
    celFunc('isURL', [CelScalar.STRING], CelScalar.BOOL, isURL),
    // the message is built from `url`, whose type is only known at run time here
    celFunc('url', [CelScalar.STRING], URL, toUrl as (s: string) => never),
    celMethod('getScheme', URL, [], CelScalar.STRING, function () {
      return this.get(url.field.scheme!) as string;
    }),
    celFunc('int', [CelScalar.STRING], CelScalar.INT, parseGoInt),
    celFunc('duration', [CelScalar.STRING], objectType(DurationSchema), goDuration),
  ];
}

let env: CelEnv | undefined;

/** The shared environment (built on first use). */
export function kubernetesCelEnv(): CelEnv {
  if (!env) {
    const files = urlFile();
    const url = files.getMessage('kubernetes.URL')!;
    env = celEnv({
      registry: createRegistry(files),
      funcs: [...strings, ...kubernetesCelFuncs(url)],
      re2: { compile: (pattern) => ({ test: searcher(pattern) }) },
    });
  }
  return env;
}
