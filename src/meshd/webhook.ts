// The validating admission webhook (`POST /validate` on --httpsAddr), answering Kubernetes AdmissionReview
// v1 and v1beta1 as Istio's pkg/webhooks/validation/server does, with its messages and its galley_validation_*
// metrics. The validation rules themselves come from the config model through `validate`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { defineCounter } from '../lib/metrics';
import { registerScope } from '../lib/log';
import { readBody, writeText } from '../serve/router';
import type { ValidationResult } from './providers';

const log = registerScope('validationServer', 'validation webhook server');

const passed = defineCounter<'group' | 'version' | 'resource'>({
  name: 'galley_validation_passed',
  help: 'Resource is valid',
  labelNames: ['group', 'version', 'resource'],
});
const failed = defineCounter<'group' | 'version' | 'resource' | 'reason'>({
  name: 'galley_validation_failed',
  help: 'Resource validation failed',
  labelNames: ['group', 'version', 'resource', 'reason'],
});
const httpError = defineCounter<'status'>({
  name: 'galley_validation_http_error',
  help: 'Resource validation http serve errors',
  labelNames: ['status'],
});

type Validate = (obj: Readonly<Record<string, unknown>>) => ValidationResult;

/** Istio's constants.AlwaysReject, ours first. */
export const ALWAYS_REJECT = ['internal.mesh.io/webhook-always-reject', 'internal.istio.io/webhook-always-reject'];

const REVIEW_VERSIONS = ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'];
// Top-level fields a config object may have (Istio's checkFields).
const VALID_FIELDS = new Set(['apiVersion', 'kind', 'metadata', 'spec', 'status']);

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { metadata: Record<string, never>; message: string };
  warnings?: string[];
}

export interface Request {
  uid: string;
  kind: { group: string; version: string; kind: string };
  resource: { group: string; version: string; resource: string };
  namespace: string;
  operation: string;
  object: unknown;
}

type Report = { result: 'passed' } | { result: 'failed'; reason: string };

export const deny = (message: string): AdmissionResponse => ({ uid: '', allowed: false, status: { metadata: {}, message } });

/** hashicorp/go-multierror's text for several errors; a single error stays as it is. */
export function formatErrors(errors: readonly string[]): string {
  if (errors.length === 1) return errors[0] as string;
  return `${errors.length} errors occurred:\n${errors.map((e) => `\t* ${e}`).join('\n')}\n\n`;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}
function rec(v: unknown): Record<string, unknown> {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function decodeRequest(raw: Record<string, unknown>): Request | undefined {
  const r = raw.request;
  if (!r || typeof r !== 'object') return undefined;
  const req = rec(r);
  const kind = rec(req.kind);
  const resource = rec(req.resource);
  return {
    uid: str(req.uid),
    kind: { group: str(kind.group), version: str(kind.version), kind: str(kind.kind) },
    resource: { group: str(resource.group), version: str(resource.version), resource: str(resource.resource) },
    namespace: str(req.namespace),
    operation: str(req.operation),
    object: req.object,
  };
}

/** Istio's validate(): the admission decision for one request, and what to count. */
export function admitRequest(request: Request, validate: Validate): { response: AdmissionResponse; report: Report } {
  if (request.operation !== 'CREATE' && request.operation !== 'UPDATE') {
    log.warn(`Unsupported webhook operation ${request.operation}`);
    return { response: { uid: '', allowed: true }, report: { result: 'failed', reason: 'unsupported_operation' } };
  }
  if (!request.object || typeof request.object !== 'object' || Array.isArray(request.object)) {
    const message = 'cannot decode configuration: request.object is not a JSON object';
    log.info(message);
    return { response: deny(message), report: { result: 'failed', reason: 'yaml_decode_error' } };
  }
  const obj = request.object as Record<string, unknown>;
  const apiVersion = str(obj.apiVersion);
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
  const gvk = `${group}/${version}, Kind=${str(obj.kind)}`;

  // The validation controller's probe (Istio's constants.AlwaysReject): refused, quietly.
  const annotations = rec(rec(obj.metadata).annotations);
  const always = ALWAYS_REJECT.find((a) => a in annotations);
  if (always) {
    return {
      response: deny(`configuration is invalid: "${always}" annotation found, rejecting`),
      report: { result: 'failed', reason: 'invalid_resource' },
    };
  }
  const result = validate(obj);
  if (result.unknownType) {
    log.info(`unrecognized type ${gvk}`);
    return { response: deny(`unrecognized type ${gvk}`), report: { result: 'failed', reason: 'unknown_type' } };
  }
  if (result.errors.length) {
    const message = `configuration is invalid: ${formatErrors(result.errors)}`;
    log.info(message);
    return { response: deny(message), report: { result: 'failed', reason: 'invalid_resource' } };
  }
  for (const key of Object.keys(obj)) {
    if (!VALID_FIELDS.has(key)) {
      const name = str(rec(obj.metadata).name);
      const message = `unknown field "${key}" on ${request.kind.kind} resource ${request.namespace}/${name}`;
      log.info(message);
      return { response: deny(message), report: { result: 'failed', reason: 'invalid_resource' } };
    }
  }
  const response: AdmissionResponse = { uid: '', allowed: true };
  if (result.warnings?.length) response.warnings = [...result.warnings];
  return { response, report: { result: 'passed' } };
}

/** A decoded AdmissionReview, or the denial that answers a body that is not one (Istio does the same). */
export type DecodedReview = { kind: string; apiVersion: string; request: Request } | { denial: Record<string, unknown> };

export function decodeReview(body: string): DecodedReview {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (e) {
    return { denial: { response: deny(`could not decode body: ${(e as Error).message}`) } };
  }
  const review = rec(raw);
  const kind = str(review.kind);
  const apiVersion = str(review.apiVersion);
  if (!kind) return { denial: { response: deny(`could not decode body: Object 'Kind' is missing in '${body}'`) } };
  if (kind !== 'AdmissionReview' || !REVIEW_VERSIONS.includes(apiVersion)) {
    return { denial: { response: deny(`could not decode body: no kind "${kind}" is registered for version "${apiVersion}"`) } };
  }
  const request = decodeRequest(review);
  if (!request) return { denial: { kind, apiVersion, response: deny('could not decode object: AdmissionReview has no request') } };
  return { kind, apiVersion, request };
}

/**
 * The AdmissionReview answer to a request body, as JSON. The response carries the request's apiVersion and
 * uid; a body that is not an AdmissionReview is answered with a denial saying why (Istio does the same).
 */
export function reviewResponse(body: string, validate: Validate): Record<string, unknown> {
  const decoded = decodeReview(body);
  if ('denial' in decoded) return decoded.denial;
  const { kind, apiVersion, request } = decoded;
  const { response, report } = admitRequest(request, validate);
  const labels = { group: request.resource.group, version: request.resource.version, resource: request.resource.resource };
  if (report.result === 'passed') passed.inc(labels);
  else failed.inc({ ...labels, reason: report.reason });
  response.uid = request.uid;
  return { kind, apiVersion, response };
}

/** `/validate` and `/validate/`. */
export function validateHandler(validate: Validate) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let body: Buffer;
    try {
      body = await readBody(req);
    } catch (e) {
      httpError.inc({ status: '400' });
      writeText(res, 400, `${(e as Error).message}\n`);
      return;
    }
    if (body.length === 0) {
      httpError.inc({ status: '400' });
      writeText(res, 400, 'no body found\n');
      return;
    }
    if (req.headers['content-type'] !== 'application/json') {
      httpError.inc({ status: '415' });
      writeText(res, 415, 'invalid Content-Type, want `application/json`\n');
      return;
    }
    writeText(res, 200, JSON.stringify(reviewResponse(body.toString('utf8'), validate)), 'application/json');
  };
}
