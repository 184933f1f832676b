// The conformance suite's checks, pure, ported from Gateway API v1.3.0 conformance/utils: http/http.go
// (MakeRequest, CompareRequest, setRedirectRequestDefaults) and kubernetes/helpers.go (GatewayAndRoutesMustBeAccepted,
// HTTPRouteMustHaveResolvedRefsConditionsTrue, HTTPRouteMustHaveCondition, HTTPRouteMustHaveNoAcceptedParents,
// GatewayMustHaveZeroRoutes, GatewayStatusMustHaveListeners). The expectations themselves are the suite's, read
// from its Go source by extract/main.go into cases.json. Differs on purpose: status is the daemon's
// /debug/gateway-status (what the leader would write) rather than objects read back from an API server.
import type { EchoRequest } from '../../helpers/echo-backend';

export type Json = Record<string, unknown>;

export interface NamespacedName {
  Name: string;
  Namespace: string;
}

export interface ExpectedResponse {
  Request: { Host?: string; Method?: string; Path?: string; Headers?: Record<string, string>; UnfollowRedirect?: boolean; Protocol?: string };
  ExpectedRequest?: { Request?: ExpectedResponse['Request']; AbsentHeaders?: string[] } | null;
  RedirectRequest?: { Scheme?: string; Host?: string; Port?: string; Path?: string } | null;
  BackendSetResponseHeaders?: Record<string, string>;
  Response?: { StatusCode?: number; Headers?: Record<string, string>; AbsentHeaders?: string[] };
  Backend?: string;
  Namespace?: string;
  MirroredTo?: Array<{ BackendRef: { Name: string; Namespace: string }; Percent?: number }>;
  TestCaseName?: string;
  /** The Gateway the suite sends this request to (extract/main.go: the gwAddr in scope). */
  $gateway?: GatewayRef;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The echo backend's report, when the body was one. */
  echo?: EchoRequest;
  /** Why there was no response (status 0): the connection's error. */
  error?: string;
}

/** Whether extract/main.go left something it could not evaluate ({"$expr": …}) anywhere in `v`. */
export function unresolved(v: unknown): string | undefined {
  if (Array.isArray(v)) return v.map(unresolved).find((x) => x !== undefined);
  if (v && typeof v === 'object') {
    if ('$expr' in v) return String((v as { $expr: string }).$expr);
    return Object.values(v)
      .map(unresolved)
      .find((x) => x !== undefined);
  }
  return undefined;
}

/** The request headers MakeRequest sends: the test's, plus X-Echo-Set-Header for the echo server. */
export function requestHeaders(e: ExpectedResponse): Record<string, string> {
  const set = Object.entries(e.BackendSetResponseHeaders ?? {}).map(([k, v]) => `${k}:${v}`);
  return { ...e.Request.Headers, 'X-Echo-Set-Header': set.join(',') };
}

function lowerKeys<T>(h: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
}

const joined = (v: string | string[] | undefined): string => (Array.isArray(v) ? v.join(',') : (v ?? ''));

/** Go's url.Parse of a Location header, as roundtripper.go reads it into a RedirectRequest. */
function redirectOf(location: string): { Scheme: string; Host: string; Port: string; Path: string } {
  const u = new URL(location, 'http://placeholder');
  return { Scheme: u.protocol.replace(':', ''), Host: u.hostname, Port: u.port, Path: u.pathname };
}

/** CompareRequest: undefined when the reply meets the expectation, else why not. */
export function compare(
  e: ExpectedResponse,
  reqPath: string,
  r: Reply,
  manifestPort: (p: number) => number | undefined = () => undefined,
): string | undefined {
  const want = e.Response?.StatusCode || 200;
  if (want !== r.status) return `expected status code to be ${want}, got ${r.status}${r.error ? ` (${r.error})` : ''}`;
  if (r.status === 200) {
    const er = e.ExpectedRequest?.Request ?? e.Request;
    const method = er.Method || 'GET';
    const got = r.echo;
    if (!got) return 'the 200 response is not the echo backend’s report';
    if (er.Host && er.Host !== got.host) return `expected host to be ${er.Host}, got ${got.host}`;
    if ((er.Path ?? '') !== got.path) return `expected path to be ${er.Path}, got ${got.path}`;
    if (method !== got.method) return `expected method to be ${method}, got ${got.method}`;
    if ((e.Namespace ?? '') !== got.namespace) return `expected namespace to be ${e.Namespace}, got ${got.namespace}`;
    const reqH = lowerKeys(got.headers);
    for (const [name, v] of Object.entries(er.Headers ?? {})) {
      const actual = reqH[name.toLowerCase()];
      if (!actual) return `expected ${name} header to be set`;
      if (actual.join(',') !== v) return `expected ${name} header to be set to ${v}, got ${actual.join(',')}`;
    }
    const resH = lowerKeys(r.headers);
    for (const [name, v] of Object.entries(e.Response?.Headers ?? {})) {
      if (resH[name.toLowerCase()] === undefined) return `expected response ${name} header to be set`;
      if (joined(resH[name.toLowerCase()]) !== v) return `expected response ${name} header to be ${v}, got ${joined(resH[name.toLowerCase()])}`;
    }
    for (const name of e.Response?.AbsentHeaders ?? [])
      if (resH[name.toLowerCase()] !== undefined) return `expected response ${name} header not to be set, got ${joined(resH[name.toLowerCase()])}`;
    for (const name of e.ExpectedRequest?.AbsentHeaders ?? [])
      if (reqH[name.toLowerCase()] !== undefined) return `expected ${name} header not to be set, got ${reqH[name.toLowerCase()]!.join(',')}`;
    if (!got.pod.startsWith(e.Backend ?? '')) return `expected pod name to start with ${e.Backend}, got ${got.pod}`;
  } else if (r.status >= 300 && r.status < 400 && e.RedirectRequest) {
    const got = redirectOf(joined(r.headers['location']));
    // The rig moved each listener to a free port; a redirect keeping the request's port names that port, which
    // reads as the manifest's (and 80/443, implied by the scheme, as not set: what Istio writes for them).
    const back = got.Port === '' ? undefined : manifestPort(Number(got.Port));
    if (back !== undefined) got.Port = (back === 80 && got.Scheme === 'http') || (back === 443 && got.Scheme === 'https') ? '' : String(back);
    const exp = { Host: got.Host, Scheme: 'http', Path: reqPath.split('?')[0]!, Port: '', ...stripEmpty(e.RedirectRequest) };
    if (exp.Host !== got.Host) return `expected redirected hostname to be "${exp.Host}", got "${got.Host}"`;
    if (exp.Port === '') {
      if (got.Scheme === 'http' && got.Port !== '80' && got.Port !== '')
        return `for http scheme, expected redirected port to be 80 or not set, got "${got.Port}"`;
      if (got.Scheme === 'https' && got.Port !== '443' && got.Port !== '')
        return `for https scheme, expected redirected port to be 443 or not set, got "${got.Port}"`;
    } else if (exp.Port !== got.Port) return `expected redirected port to be "${exp.Port}", got "${got.Port}"`;
    if (exp.Scheme !== got.Scheme) return `expected redirected scheme to be "${exp.Scheme}", got "${got.Scheme}"`;
    if (exp.Path !== got.Path) return `expected redirected path to be "${exp.Path}", got "${got.Path}"`;
  }
  return undefined;
}

function stripEmpty<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== '' && v !== undefined && v !== null)) as Partial<T>;
}

// ---- status ----

interface Condition {
  type: string;
  status: string;
  reason: string;
}
interface StatusObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  status: {
    conditions?: Condition[];
    addresses?: unknown[];
    listeners?: Array<{ name: string; attachedRoutes: number; supportedKinds: Array<{ group?: string; kind: string }>; conditions: Condition[] }>;
    parents?: Array<{
      parentRef: { name: string; namespace?: string; sectionName?: string; group?: string; kind?: string };
      controllerName: string;
      conditions: Condition[];
    }>;
  };
}

export type StatusList = readonly StatusObject[];

function find(st: StatusList, kinds: readonly string[], nn: NamespacedName): StatusObject | undefined {
  return st.find((o) => kinds.includes(o.kind) && o.metadata.name === nn.Name && (o.metadata.namespace ?? 'default') === nn.Namespace);
}

const ROUTE_KINDS = ['HTTPRoute', 'GRPCRoute', 'TLSRoute'];
const GATEWAY_KINDS = ['Gateway', 'KubernetesGateway'];

function condMatches(have: readonly Condition[], want: { Type: string; Status: string; Reason?: string }): boolean {
  return have.some((c) => c.type === want.Type && c.status === want.Status && (!want.Reason || c.reason === want.Reason));
}

function parentsFor(route: StatusObject | undefined, gw: NamespacedName, routeNs: string) {
  return (route?.status.parents ?? []).filter((p) => p.parentRef.name === gw.Name && (p.parentRef.namespace ?? routeNs) === gw.Namespace);
}

interface ExpectedParent {
  ParentRef: { Group?: string; Kind?: string; Name: string; Namespace?: string };
  ControllerName: string | { $suite: 'ControllerName' };
  Conditions: Array<{ Type: string; Status: string; Reason?: string }>;
}

/** parentsForRouteMatch (conformance/utils/kubernetes/helpers.go); `suite.ControllerName` is our controller. */
function parentsMatch(route: StatusObject, want: readonly ExpectedParent[], namespaceRequired: boolean, controller: string): string | undefined {
  const name = route.metadata.name;
  const have = route.status.parents ?? [];
  if (have.length !== want.length) return `route ${name}: ${have.length} parents, expected ${want.length}`;
  for (const [i, w] of want.entries()) {
    const a = have[i]!;
    const wantController = typeof w.ControllerName === 'string' ? w.ControllerName : controller;
    if (a.controllerName !== wantController) return `route ${name}: controllerName ${a.controllerName}, expected ${wantController}`;
    if (a.parentRef.group !== w.ParentRef.Group) return `route ${name}: parentRef group ${a.parentRef.group}, expected ${w.ParentRef.Group}`;
    if (a.parentRef.kind !== w.ParentRef.Kind) return `route ${name}: parentRef kind ${a.parentRef.kind}, expected ${w.ParentRef.Kind}`;
    if (a.parentRef.name !== w.ParentRef.Name) return `route ${name}: parentRef name ${a.parentRef.name}, expected ${w.ParentRef.Name}`;
    if (a.parentRef.namespace !== w.ParentRef.Namespace && (namespaceRequired || a.parentRef.namespace !== undefined))
      return `route ${name}: parentRef namespace ${a.parentRef.namespace}, expected ${w.ParentRef.Namespace}`;
    if (a.conditions.length < w.Conditions.length) return `route ${name}: fewer conditions than expected: ${JSON.stringify(a.conditions)}`;
    for (const c of w.Conditions)
      if (!condMatches(a.conditions, c)) return `route ${name}: no ${c.Type}=${c.Status} ${c.Reason ?? ''}: ${JSON.stringify(a.conditions)}`;
  }
  return undefined;
}

export interface GatewayRef {
  gateway: NamespacedName;
  listeners?: string[];
}

/** One status helper call of the suite, checked against the daemon's status; undefined when it holds. */
export function checkCall(fn: string, args: readonly unknown[], st: StatusList, controller: string): string | undefined {
  // a variadic argument passed as `routes...` is one list in cases.json: its names count as arguments
  const nns = args.flat().filter((a): a is NamespacedName => (a as Json)?.['$type'] === 'types.NamespacedName');
  switch (fn) {
    case 'NamespacesMustBeReady':
      return undefined; // no pods: the echo backends are up before the daemon starts
    case 'GatewayAndHTTPRoutesMustBeAccepted':
    case 'GatewayAndTLSRoutesMustBeAccepted':
    case 'GatewayAndRoutesMustBeAccepted': {
      // WaitForGatewayAddress, RouteMustHaveParents, GatewayListenersMustHaveConditions
      const ref = args.find((a) => (a as Json)?.['$type'] === 'GatewayRef') as GatewayRef | undefined;
      if (!ref) return 'no Gateway reference';
      const gw = find(st, GATEWAY_KINDS, ref.gateway);
      if (!gw) return `Gateway ${ref.gateway.Namespace}/${ref.gateway.Name} has no status`;
      if (!gw.status.addresses?.length) return `Gateway ${ref.gateway.Name} has no address`;
      for (const l of gw.status.listeners ?? [])
        for (const type of ['ResolvedRefs', 'Accepted', 'Programmed'])
          if (!condMatches(l.conditions, { Type: type, Status: 'True' }))
            return `Gateway ${ref.gateway.Name} listener ${l.name}: ${type} is not True`;
      const sections = ref.listeners?.length ? ref.listeners : [undefined];
      for (const nn of nns) {
        const route = find(st, ROUTE_KINDS, nn);
        if (!route) return `route ${nn.Namespace}/${nn.Name} has no status`;
        const parents = route.status.parents ?? [];
        // RouteMustHaveParents (parentsForRouteMatch): as many parents as listeners named, in order, each with the
        // controller, the Gateway's name (its namespace when the route is elsewhere) and Accepted; sectionName and
        // port are not compared
        if (parents.length !== sections.length) return `route ${nn.Name}: ${parents.length} parents, expected ${sections.length}`;
        for (const p of parents) {
          if (p.controllerName !== controller) return `route ${nn.Name}: controllerName ${p.controllerName}`;
          if (p.parentRef.name !== ref.gateway.Name) return `route ${nn.Name}: parent ${p.parentRef.name}, expected ${ref.gateway.Name}`;
          if ((nn.Namespace !== ref.gateway.Namespace || p.parentRef.namespace !== undefined) && p.parentRef.namespace !== ref.gateway.Namespace)
            return `route ${nn.Name}: parent namespace ${p.parentRef.namespace}, expected ${ref.gateway.Namespace}`;
          if (!condMatches(p.conditions, { Type: 'Accepted', Status: 'True', Reason: 'Accepted' }))
            return `route ${nn.Name}: not Accepted by ${ref.gateway.Name}: ${JSON.stringify(p.conditions)}`;
        }
      }
      return undefined;
    }
    case 'HTTPRouteMustHaveResolvedRefsConditionsTrue':
    case 'TLSRouteMustHaveCondition':
    case 'HTTPRouteMustHaveCondition': {
      const [routeNN, gwNN] = nns;
      const cond = (args.find((a) => (a as Json)?.['$type'] === 'metav1.Condition') as
        { Type: string; Status: string; Reason?: string } | undefined) ?? {
        Type: 'ResolvedRefs',
        Status: 'True',
        Reason: 'ResolvedRefs',
      };
      const route = find(st, ROUTE_KINDS, routeNN!);
      const parents = parentsFor(route, gwNN!, routeNN!.Namespace);
      if (parents.length === 0) return `route ${routeNN!.Name}: no parent ${gwNN!.Name} in status`;
      return parents.some((p) => condMatches(p.conditions, cond))
        ? undefined
        : `route ${routeNN!.Name}: no ${cond.Type}=${cond.Status}${cond.Reason ? ` (${cond.Reason})` : ''}: ${JSON.stringify(parents.map((p) => p.conditions))}`;
    }
    case 'HTTPRouteMustHaveParents':
    case 'RouteMustHaveParents': {
      // parentsForRouteMatch: the same number of parents, in order, each with the controller, group, kind, name,
      // namespace (when required or when the status names one) and at least the expected conditions
      const route = find(st, ROUTE_KINDS, nns[0]!);
      if (!route) return `route ${nns[0]!.Namespace}/${nns[0]!.Name} has no status`;
      const want = args.find(Array.isArray) as ExpectedParent[] | undefined;
      if (!want) return 'no expected parents';
      return parentsMatch(route, want, args[args.length - 1] === true, controller);
    }
    case 'HTTPRouteMustHaveNoAcceptedParents': {
      const route = find(st, ROUTE_KINDS, nns[0]!);
      const accepted = (route?.status.parents ?? []).filter((p) => condMatches(p.conditions, { Type: 'Accepted', Status: 'True' }));
      return accepted.length === 0 ? undefined : `route ${nns[0]!.Name} has accepted parents`;
    }
    case 'GatewayMustHaveZeroRoutes': {
      const gw = find(st, GATEWAY_KINDS, nns[0]!);
      if (!gw) return `Gateway ${nns[0]!.Name} has no status`;
      const n = (gw.status.listeners ?? []).reduce((a, l) => a + l.attachedRoutes, 0);
      return n === 0 ? undefined : `Gateway ${nns[0]!.Name} has ${n} attached routes`;
    }
    case 'GatewayStatusMustHaveListeners': {
      const gw = find(st, GATEWAY_KINDS, nns[0]!);
      if (!gw) return `Gateway ${nns[0]!.Name} has no status`;
      const want = args.find(Array.isArray) as Array<{
        Name: string;
        AttachedRoutes: number;
        SupportedKinds?: Array<{ Group?: string; Kind: string }>;
        Conditions: Array<{ Type: string; Status: string; Reason?: string }>;
      }>;
      const have = gw.status.listeners ?? [];
      if (have.length !== want.length) return `Gateway ${nns[0]!.Name}: ${have.length} listeners, expected ${want.length}`;
      for (const w of want) {
        const l = have.find((x) => x.name === w.Name);
        if (!l) return `Gateway ${nns[0]!.Name}: no listener ${w.Name}`;
        if (l.attachedRoutes !== w.AttachedRoutes) return `listener ${w.Name}: attachedRoutes ${l.attachedRoutes}, expected ${w.AttachedRoutes}`;
        // listenersMatch: the expected kinds are among the listener's (an implementation may support more)
        const kinds = new Set(l.supportedKinds.map((k) => k.kind));
        const missing = (w.SupportedKinds ?? []).filter((k) => !kinds.has(k.Kind));
        if (missing.length) return `listener ${w.Name}: supportedKinds ${[...kinds].join(',')}, missing ${missing.map((k) => k.Kind).join(',')}`;
        for (const c of w.Conditions)
          if (!condMatches(l.conditions, c)) return `listener ${w.Name}: no ${c.Type}=${c.Status} ${c.Reason ?? ''}: ${JSON.stringify(l.conditions)}`;
      }
      return undefined;
    }
    default:
      return `the runner does not know kubernetes.${fn}`;
  }
}
