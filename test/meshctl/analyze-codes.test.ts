// Every analysis code meshctl implements, each with an input that must produce exactly the given
// log line (Istio's template with its parameters, the resource and the file:line it points at) and a
// corrected input that must not produce the code. Expected texts come from Istio's messages.yaml
// templates (mesh's names), not from our output. All analyzers run over every namespace, with the
// files-only stand-in ingress gateway (Pod mesh-system/mesh-ingressgateway-dummypod) added.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { loadEnvoyFilterTypes } from '../../src/config/validate';
import { ALL_ANALYZERS } from '../../src/analysis/analyzers';
import { renderLog } from '../../src/meshctl/analyze/format';
import { defaultResources, loadResources } from '../../src/meshctl/analyze/load';
import { analyze, defaultMeshConfig, parseMeshConfig } from '../../src/analysis/run';
import { EC_P256_KEY } from '../helpers/openssl';

await loadEnvoyFilterTypes();

// A current self-signed certificate for the valid gateway credential, made by openssl as the other TLS tests do.
const certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'analyze-codes-'));
execFileSync('openssl', ['req', '-x509', ...EC_P256_KEY, '-keyout', 'k.pem', '-out', 'c.pem', '-days', '2', '-subj', '/CN=test'], {
  cwd: certDir,
  stdio: ['ignore', 'ignore', 'pipe'],
});
const CERT = fs.readFileSync(path.join(certDir, 'c.pem'), 'utf8').trim();
fs.rmSync(certDir, { recursive: true, force: true });

interface Case {
  code: string;
  /** The input (case.yaml); line 1 is its first line. */
  input: string;
  line: string;
  /** The same input with the problem fixed. */
  fixed: string;
  meshConfig?: string;
}

function run(input: string, meshConfig?: string): string[] {
  const mesh = meshConfig ? parseMeshConfig(meshConfig) : defaultMeshConfig();
  const loaded = loadResources(input, 'case.yaml', 'default');
  if (loaded.errors.length > 0) throw new Error(loaded.errors.join('\n'));
  const resources = [...defaultResources(mesh, 'mesh-system'), ...loaded.resources];
  return analyze(resources, { analyzers: ALL_ANALYZERS, suppressions: [], mesh, meshNamespace: 'mesh-system' }).messages.map((m) =>
    renderLog(m, false),
  );
}

const VS = 'apiVersion: networking.istio.io/v1\nkind: VirtualService\n';
const DR = 'apiVersion: networking.istio.io/v1\nkind: DestinationRule\n';
const GW = 'apiVersion: networking.istio.io/v1\nkind: Gateway\n';
const SE = 'apiVersion: networking.istio.io/v1\nkind: ServiceEntry\n';
const SC = 'apiVersion: networking.istio.io/v1\nkind: Sidecar\n';
const EF = 'apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\n';
const AP = 'apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n';
const RA = 'apiVersion: security.istio.io/v1\nkind: RequestAuthentication\n';
const TEL = 'apiVersion: telemetry.istio.io/v1\nkind: Telemetry\n';
const SVC = 'apiVersion: v1\nkind: Service\n';
const POD = 'apiVersion: v1\nkind: Pod\n';
const NS = 'apiVersion: v1\nkind: Namespace\n';
const DEP = 'apiVersion: apps/v1\nkind: Deployment\n';
const MWC = 'apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\n';
const VWC = 'apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n';
const SECRET = 'apiVersion: v1\nkind: Secret\n';
const CM = 'apiVersion: v1\nkind: ConfigMap\n';

/** A Service `name` in `ns` selecting app=name with one http port 80. */
const svc = (name: string, ns = 'default', ports = '  - {name: http, port: 80}') =>
  `${SVC}metadata: {name: ${name}, namespace: ${ns}}\nspec:\n  selector: {app: ${name}}\n  ports:\n${ports}\n`;
/** A Pod in the mesh (it runs the proxy). */
const meshPod = (name: string, labels: string, ns = 'default') =>
  `${POD}metadata: {name: ${name}, namespace: ${ns}, labels: {${labels}}}\nspec:\n  containers:\n  - {name: app, image: app}\n  - {name: mesh-proxy, image: mesh/proxyv2}\n`;

const cases: Case[] = [
  {
    code: 'IST0002',
    input: `${SC}metadata: {name: egress, namespace: default}\nspec:\n  outboundTrafficPolicy:\n    mode: REGISTRY_ONLY\n    egressProxy: {host: proxy.example.com}\n`,
    line: 'Warning [IST0002] (Sidecar default/egress case.yaml:1) Deprecated: OutboundTrafficPolicy.EgressProxy ignored',
    fixed: `${SC}metadata: {name: egress, namespace: default}\nspec:\n  outboundTrafficPolicy:\n    mode: REGISTRY_ONLY\n`,
  },
  {
    code: 'IST0101',
    input: `${VS}metadata: {name: reviews, namespace: default}\nspec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination:\n        host: ratings\n---\n${svc('reviews')}`,
    line: 'Error [IST0101] (VirtualService default/reviews case.yaml:9) Referenced host not found: "ratings"',
    fixed: `${VS}metadata: {name: reviews, namespace: default}\nspec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination:\n        host: reviews\n---\n${svc('reviews')}`,
  },
  {
    code: 'IST0102',
    input: `${NS}metadata:\n  name: shop\n`,
    line: "Info [IST0102] (Namespace shop case.yaml:4) The namespace is not enabled for Mesh injection. Run 'orchctl label namespace shop mesh-injection=enabled' to enable it, or 'orchctl label namespace shop mesh-injection=disabled' to explicitly mark it as not needing injection.",
    fixed: `${NS}metadata:\n  name: shop\n  labels: {mesh-injection: disabled}\n`,
  },
  {
    code: 'IST0103',
    input: `${NS}metadata: {name: shop, labels: {mesh-injection: enabled}}\n---\n${POD}metadata: {name: web, namespace: shop}\nspec:\n  containers:\n  - {name: web, image: web}\n`,
    line: 'Warning [IST0103] (Pod shop/web case.yaml:5) The pod shop/web is missing the Mesh proxy. This can often be resolved by restarting or redeploying the workload.',
    fixed: `${NS}metadata: {name: shop, labels: {mesh-injection: enabled}}\n---\n${POD}metadata: {name: web, namespace: shop}\nspec:\n  containers:\n  - {name: web, image: web}\n  - {name: mesh-proxy, image: mesh/proxyv2}\n`,
  },
  {
    code: 'IST0106',
    input: `${DR}metadata: {name: reviews, namespace: default}\nspec:\n  host: reviews\n  subsets:\n  - name: v1\n  - name: v1\n`,
    line: 'Error [IST0106] (DestinationRule default/reviews case.yaml:8) Schema validation error: duplicate subset names: v1',
    fixed: `${DR}metadata: {name: reviews, namespace: default}\nspec:\n  host: reviews\n  subsets:\n  - name: v1\n  - name: v2\n`,
  },
  {
    code: 'IST0107',
    input: `${NS}metadata:\n  name: shop\n  labels: {mesh-injection: enabled}\n  annotations:\n    sidecar.mesh.io/proxyCPU: 100m\n`,
    line: 'Warning [IST0107] (Namespace shop case.yaml:7) Misplaced annotation: sidecar.mesh.io/proxyCPU can only be applied to Pod',
    fixed: `${NS}metadata:\n  name: shop\n  labels: {mesh-injection: enabled}\n`,
  },
  {
    code: 'IST0108',
    input: `${svc('web')}---\n${POD}metadata:\n  name: web\n  annotations:\n    sidecar.mesh.io/injectt: "true"\n`,
    line: 'Warning [IST0108] (Pod default/web case.yaml:14) Unknown annotation: sidecar.mesh.io/injectt',
    fixed: `${svc('web')}---\n${POD}metadata:\n  name: web\n  annotations:\n    sidecar.mesh.io/proxyCPU: 100m\n`,
  },
  {
    code: 'IST0109',
    input: `${VS}metadata:\n  name: a\nspec:\n  hosts: [web]\n  http:\n  - route: [{destination: {host: web}}]\n---\n${VS}metadata:\n  name: b\nspec:\n  hosts: [web]\n  http:\n  - route: [{destination: {host: web}}]\n---\n${svc('web')}`,
    line: 'Error [IST0109] (VirtualService default/b case.yaml:13) The VirtualServices default/a,default/b associated with mesh gateway define the same host */web.default.svc.cluster.local which can lead to undefined behavior. This can be fixed by merging the conflicting VirtualServices into a single resource.',
    fixed: `${VS}metadata:\n  name: a\nspec:\n  hosts: [web]\n  http:\n  - route: [{destination: {host: web}}]\n---\n${svc('web')}`,
  },
  {
    code: 'IST0110',
    input: `${meshPod('web', 'app: web')}---\n${SC}metadata: {name: one}\nspec:\n  workloadSelector: {labels: {app: web}}\n---\n${SC}metadata:\n  name: two\nspec:\n  workloadSelector: {labels: {app: web}}\n`,
    line: 'Error [IST0110] (Sidecar default/two case.yaml:18) The Sidecars [one two] in namespace "default" select the same workload pod "web", which can lead to undefined behavior.',
    fixed: `${meshPod('web', 'app: web')}---\n${SC}metadata: {name: one}\nspec:\n  workloadSelector: {labels: {app: web}}\n`,
  },
  {
    code: 'IST0111',
    input: `${SC}metadata: {name: one}\nspec: {egress: [{hosts: ["./*"]}]}\n---\n${SC}metadata: {name: two}\nspec: {egress: [{hosts: ["./*"]}]}\n`,
    line: 'Error [IST0111] (Sidecar default/two case.yaml:6) The Sidecars [one two] in namespace "default" have no workload selector, which can lead to undefined behavior.',
    fixed: `${SC}metadata: {name: one}\nspec: {egress: [{hosts: ["./*"]}]}\n`,
  },
  {
    code: 'IST0112',
    input: `${VS}metadata: {name: web}\nspec:\n  hosts: [web]\n  http:\n  - route:\n    - destination: {host: web}\n---\n${svc('web', 'default', '  - {name: http, port: 80}\n  - {name: grpc, port: 9090}')}`,
    line: 'Error [IST0112] (VirtualService default/web case.yaml:8) This VirtualService routes to a service "web" that exposes multiple ports [80 9090]. Specifying a port in the destination is required to disambiguate.',
    fixed: `${VS}metadata: {name: web}\nspec:\n  hosts: [web]\n  http:\n  - route:\n    - destination: {host: web, port: {number: 80}}\n---\n${svc('web', 'default', '  - {name: http, port: 80}\n  - {name: grpc, port: 9090}')}`,
  },
  {
    code: 'IST0116',
    input: `${DEP}metadata:\n  name: web\nspec:\n  template:\n    metadata: {labels: {app: web, sidecar.mesh.io/inject: "true"}}\n---\n${SVC}metadata: {name: web-tcp}\nspec:\n  selector: {app: web}\n  ports: [{name: http, port: 80, protocol: TCP}]\n---\n${SVC}metadata: {name: web-udp}\nspec:\n  selector: {app: web}\n  ports: [{name: dns, port: 80, protocol: UDP}]\n`,
    line: 'Warning [IST0116] (Deployment default/web case.yaml:4) This deployment web is associated with multiple services using port 80 but different protocols: [default/web-tcp default/web-udp]',
    fixed: `${DEP}metadata:\n  name: web\nspec:\n  template:\n    metadata: {labels: {app: web, sidecar.mesh.io/inject: "true"}}\n---\n${SVC}metadata: {name: web-tcp}\nspec:\n  selector: {app: web}\n  ports: [{name: http, port: 80, protocol: TCP}]\n`,
  },
  {
    code: 'IST0118',
    input: `${SVC}metadata: {name: web}\nspec:\n  ports:\n  - name: web\n    port: 8080\n    targetPort: 80\n`,
    line: "Info [IST0118] (Service default/web case.yaml:7) Port name web (port: 8080, targetPort: 80) doesn't follow the naming convention of Mesh port.",
    fixed: `${SVC}metadata: {name: web}\nspec:\n  ports:\n  - name: http-web\n    port: 8080\n    targetPort: 80\n`,
  },
  {
    code: 'IST0123',
    input: `${NS}metadata: {name: shop, labels: {mesh-injection: enabled, mesh.io/rev: canary}}\n`,
    line: 'Warning [IST0123] (Namespace shop case.yaml:1) The namespace has more than one type of injection labels [mesh-injection=enabled mesh.io/rev=canary], which may lead to undefined behavior. Make sure only one injection label exists.',
    fixed: `${NS}metadata: {name: shop, labels: {mesh.io/rev: canary}}\n`,
  },
  {
    code: 'IST0125',
    input: `${POD}metadata:\n  name: web\n  annotations:\n    traffic.sidecar.mesh.io/excludeInboundPorts: "80,http"\n`,
    line: "Warning [IST0125] (Pod default/web case.yaml:6) Invalid annotation traffic.sidecar.mesh.io/excludeInboundPorts: excludeInboundPorts invalid: failed parsing port 'http': failed parsing port 'http': strconv.ParseUint: parsing \"http\": invalid syntax",
    fixed: `${POD}metadata:\n  name: web\n  annotations:\n    traffic.sidecar.mesh.io/excludeInboundPorts: "80,8080"\n`,
  },
  {
    code: 'IST0127',
    input: `${meshPod('web', 'app: web')}---\n${AP}metadata: {name: api}\nspec:\n  selector: {matchLabels: {app: api}}\n`,
    line: 'Warning [IST0127] (AuthorizationPolicy default/api case.yaml:9) No matching workloads for this resource with the following labels: app=api',
    fixed: `${meshPod('web', 'app: web')}---\n${AP}metadata: {name: api}\nspec:\n  selector: {matchLabels: {app: web}}\n`,
  },
  {
    code: 'IST0128',
    input: `${DR}metadata: {name: ext}\nspec:\n  host: api.example.com\n  trafficPolicy:\n    tls: {mode: SIMPLE}\n`,
    line: 'Warning [IST0128] (DestinationRule default/ext case.yaml:1) DestinationRule default/ext in namespace default has TLS mode set to SIMPLE but no caCertificates are set to validate server identity for host: api.example.com',
    fixed: `${DR}metadata: {name: ext}\nspec:\n  host: api.example.com\n  trafficPolicy:\n    tls: {mode: SIMPLE, caCertificates: /etc/certs/ca.pem}\n`,
  },
  {
    code: 'IST0129',
    input: `${DR}metadata: {name: ext}\nspec:\n  host: api.example.com\n  trafficPolicy:\n    portLevelSettings:\n    - port: {number: 443}\n      tls: {mode: MUTUAL}\n`,
    line: 'Warning [IST0129] (DestinationRule default/ext case.yaml:1) DestinationRule default/ext in namespace default has TLS mode set to MUTUAL but no caCertificates are set to validate server identity for host: api.example.com at port number:443',
    fixed: `${DR}metadata: {name: ext}\nspec:\n  host: api.example.com\n  trafficPolicy:\n    portLevelSettings:\n    - port: {number: 443}\n      tls: {mode: MUTUAL, caCertificates: /etc/certs/ca.pem}\n`,
  },
  {
    code: 'IST0130',
    input: `${VS}metadata: {name: web}\nspec:\n  hosts: [web]\n  http:\n  - route: [{destination: {host: web}}]\n  - name: later\n    route: [{destination: {host: web}}]\n---\n${svc('web')}`,
    line: 'Warning [IST0130] (VirtualService default/web case.yaml:1) VirtualService rule "later" not used (only the last rule can have no matches).',
    fixed: `${VS}metadata: {name: web}\nspec:\n  hosts: [web]\n  http:\n  - match: [{uri: {prefix: /a}}]\n    route: [{destination: {host: web}}]\n  - name: later\n    route: [{destination: {host: web}}]\n---\n${svc('web')}`,
  },
  {
    code: 'IST0131',
    input: `${VS}metadata: {name: web}\nspec:\n  hosts: [web]\n  http:\n  - match: [{uri: {exact: /a}}]\n    route: [{destination: {host: web}}]\n  - match: [{uri: {exact: /a}}, {uri: {exact: /b}}]\n    route: [{destination: {host: web}}]\n---\n${svc('web')}`,
    line: 'Info [IST0131] (VirtualService default/web case.yaml:1) VirtualService rule #1 match #0 is not used (duplicate/overlapping match in rule #0).',
    fixed: `${VS}metadata: {name: web}\nspec:\n  hosts: [web]\n  http:\n  - match: [{uri: {exact: /a}}]\n    route: [{destination: {host: web}}]\n  - match: [{uri: {exact: /b}}]\n    route: [{destination: {host: web}}]\n---\n${svc('web')}`,
  },
  {
    code: 'IST0132',
    input: `${GW}metadata: {name: gw}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [a.example.com]}]\n---\n${VS}metadata: {name: web}\nspec:\n  hosts: [b.example.com]\n  gateways:\n  - gw\n  http: [{route: [{destination: {host: web}}]}]\n---\n${svc('web')}`,
    line: 'Warning [IST0132] (VirtualService default/web case.yaml:14) one or more host [b.example.com] defined in VirtualService default/web not found in Gateway default/gw.',
    fixed: `${GW}metadata: {name: gw}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [b.example.com]}]\n---\n${VS}metadata: {name: web}\nspec:\n  hosts: [b.example.com]\n  gateways:\n  - gw\n  http: [{route: [{destination: {host: web}}]}]\n---\n${svc('web')}`,
  },
  {
    code: 'IST0133',
    input: `${DR}metadata: {name: web}\nspec:\n  host: web\n  trafficPolicy:\n    outlierDetection:\n      consecutiveErrors: 7\n`,
    line: 'Warning [IST0133] (DestinationRule default/web case.yaml:8) Schema validation warning: outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead',
    fixed: `${DR}metadata: {name: web}\nspec:\n  host: web\n  trafficPolicy:\n    outlierDetection:\n      consecutive5xxErrors: 7\n`,
  },
  {
    code: 'IST0134',
    input: `${SE}metadata: {name: db}\nspec:\n  hosts: [db.example.com]\n  ports:\n  - number: 5432\n    name: postgres\n    protocol: TCP\n  resolution: DNS\n`,
    line: 'Warning [IST0134] (ServiceEntry default/db case.yaml:8) ServiceEntry addresses are required for this protocol.',
    fixed: `${SE}metadata: {name: db}\nspec:\n  hosts: [db.example.com]\n  addresses: [10.0.0.8]\n  ports:\n  - number: 5432\n    name: postgres\n    protocol: TCP\n  resolution: DNS\n`,
  },
  {
    code: 'IST0135',
    input: `${POD}metadata:\n  name: web\n  annotations:\n    sidecar.mesh.io/inject: "false"\n`,
    line: 'Info [IST0135] (Pod default/web case.yaml:6) Annotation "sidecar.mesh.io/inject" has been deprecated in favor of the "sidecar.mesh.io/inject" label and may not work in future Mesh versions.',
    fixed: `${POD}metadata:\n  name: web\n  labels:\n    sidecar.mesh.io/inject: "false"\n`,
  },
  {
    code: 'IST0137',
    input: `${DEP}metadata:\n  name: web\nspec:\n  template:\n    metadata: {labels: {app: web, sidecar.mesh.io/inject: "true"}}\n---\n${SVC}metadata: {name: a}\nspec:\n  selector: {app: web}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n---\n${SVC}metadata: {name: b}\nspec:\n  selector: {app: web}\n  ports: [{name: http, port: 81, targetPort: 8080}]\n`,
    line: 'Warning [IST0137] (Deployment default/web case.yaml:4) This deployment web is associated with multiple services [default/a default/b] using targetPort "8080" but different ports: [80 81].',
    fixed: `${DEP}metadata:\n  name: web\nspec:\n  template:\n    metadata: {labels: {app: web, sidecar.mesh.io/inject: "true"}}\n---\n${SVC}metadata: {name: a}\nspec:\n  selector: {app: web}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n`,
  },
  {
    code: 'IST0138',
    input: `${GW}metadata:\n  name: one\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [a.example.com], tls: {mode: SIMPLE, credentialName: cert}}]\n---\n${GW}metadata:\n  name: two\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 8443, name: https, protocol: HTTPS}, hosts: [b.example.com], tls: {mode: SIMPLE, credentialName: cert}}]\n`,
    line: 'Warning [IST0138] (Gateway default/one case.yaml:4) Duplicate certificate in multiple gateways [default/one default/two] may cause 404s if clients re-use HTTP2 connections.',
    fixed: `${GW}metadata:\n  name: one\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [a.example.com], tls: {mode: SIMPLE, credentialName: cert}}]\n---\n${GW}metadata:\n  name: two\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 8443, name: https, protocol: HTTPS}, hosts: [b.example.com], tls: {mode: SIMPLE, credentialName: other-cert}}]\n`,
  },
  {
    code: 'IST0139',
    input: `${MWC}metadata: {name: mesh-sidecar-injector}\nwebhooks:\n- name: sidecar-injector.mesh.io\n  clientConfig: {service: {name: meshd, namespace: mesh-system}}\n`,
    line: 'Error [IST0139] (MutatingWebhookConfiguration mesh-sidecar-injector case.yaml:1) Injector refers to a control plane service that does not exist: mesh-system/meshd.',
    fixed: `${MWC}metadata: {name: mesh-sidecar-injector}\nwebhooks:\n- name: sidecar-injector.mesh.io\n  clientConfig: {service: {name: meshd, namespace: mesh-system}}\n---\n${svc('meshd', 'mesh-system', '  - {name: https-webhook, port: 443}')}`,
  },
  {
    code: 'IST0140',
    input: `${VS}metadata: {name: internal}\nspec:\n  hosts: [web]\n  http: [{route: [{destination: {host: web, subset: v1}}]}]\n---\n${GW}metadata: {name: gw}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]\n---\n${VS}metadata: {name: public}\nspec:\n  hosts: ["*"]\n  gateways: [gw]\n  http:\n  - route:\n    - destination:\n        host: web\n---\n${DR}metadata: {name: web}\nspec: {host: web, subsets: [{name: v1, labels: {version: v1}}]}\n---\n${svc('web')}`,
    line: 'Warning [IST0140] (VirtualService default/public case.yaml:24) Subset in virtual service default/internal has no effect on ingress gateway default/public requests',
    fixed: `${VS}metadata: {name: internal}\nspec:\n  hosts: [web]\n  http: [{route: [{destination: {host: web, subset: v1}}]}]\n---\n${GW}metadata: {name: gw}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]\n---\n${VS}metadata: {name: public}\nspec:\n  hosts: ["*"]\n  gateways: [gw]\n  http:\n  - route:\n    - destination:\n        host: web\n        subset: v1\n---\n${DR}metadata: {name: web}\nspec: {host: web, subsets: [{name: v1, labels: {version: v1}}]}\n---\n${svc('web')}`,
  },
  {
    code: 'IST0144',
    input: `${POD}metadata: {name: web}\nspec:\n  securityContext: {runAsUser: 1337}\n  containers: [{name: web, image: web}]\n`,
    line: 'Warning [IST0144] (Pod default/web case.yaml:1) User ID (UID) 1337 is reserved for the sidecar proxy.',
    fixed: `${POD}metadata: {name: web}\nspec:\n  securityContext: {runAsUser: 1000}\n  containers: [{name: web, image: web}]\n`,
  },
  {
    code: 'IST0145',
    input: `${GW}metadata: {name: one}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [a.example.com]}]\n---\n${GW}metadata: {name: two}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [a.example.com]}]\n`,
    line: 'Error [IST0145] (Gateway default/one case.yaml:1) Conflict with gateways default/two (workload selector mesh=ingressgateway, port 80, hosts a.example.com).',
    fixed: `${GW}metadata: {name: one}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [a.example.com]}]\n---\n${GW}metadata: {name: two}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [b.example.com]}]\n`,
  },
  {
    code: 'IST0146',
    input: `${DEP}metadata: {name: web}\nspec:\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: mesh-proxy, image: auto}]}\n`,
    line: 'Warning [IST0146] (Deployment default/web case.yaml:1) Deployment web contains `image: auto` but does not match any Mesh injection webhook selectors.',
    fixed: `${DEP}metadata: {name: web}\nspec:\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: mesh-proxy, image: auto}]}\n---\n${MWC}metadata: {name: mesh-sidecar-injector}\nwebhooks:\n- name: sidecar-injector.mesh.io\n  clientConfig: {url: "https://meshd.example.com:15017/inject"}\n`,
  },
  {
    code: 'IST0147',
    input: `${POD}metadata: {name: web}\nspec: {containers: [{name: mesh-proxy, image: auto}]}\n`,
    line: 'Error [IST0147] (Pod default/web case.yaml:1) Pod web contains `image: auto` but does not match any Mesh injection webhook selectors.',
    fixed: `${POD}metadata: {name: web}\nspec: {containers: [{name: mesh-proxy, image: mesh/proxyv2}]}\n`,
  },
  {
    code: 'IST0148',
    input: `${CM}metadata: {name: mesh-sidecar-injector, namespace: mesh-system}\ndata:\n  values: '{"sidecarInjectorWebhook": {"enableNamespacesByDefault": true}}'\n---\n${NS}metadata: {name: shop}\n`,
    line: 'Info [IST0148] (Namespace shop case.yaml:7) is enabled for Mesh injection, as Mesh is installed with enableNamespacesByDefault as true.',
    fixed: `${CM}metadata: {name: mesh-sidecar-injector, namespace: mesh-system}\ndata:\n  values: '{"sidecarInjectorWebhook": {"enableNamespacesByDefault": true}}'\n---\n${NS}metadata: {name: shop, labels: {mesh-injection: enabled}}\n`,
  },
  {
    code: 'IST0149',
    input: `${GW}metadata: {name: gw, namespace: mesh-system}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]\n---\n${VS}metadata: {name: web, namespace: mesh-system}\nspec:\n  hosts: ["*"]\n  gateways: [gw]\n  http:\n  - match: [{headers: {"@request.auth.claims.group": {exact: admin}}}]\n    route: [{destination: {host: web.default.svc.cluster.local}}]\n---\n${svc('web')}`,
    line: 'Error [IST0149] (VirtualService mesh-system/web case.yaml:8) The virtual service uses the JWT claim based routing (key: @request.auth.claims.group) but found no request authentication for the gateway (mesh-system/gw) pod (mesh-ingressgateway-dummypod). The request authentication must first be applied for the gateway pods to validate the JWT token and make the claims available for routing.',
    fixed: `${GW}metadata: {name: gw, namespace: mesh-system}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]\n---\n${VS}metadata: {name: web, namespace: mesh-system}\nspec:\n  hosts: ["*"]\n  gateways: [gw]\n  http:\n  - match: [{headers: {"@request.auth.claims.group": {exact: admin}}}]\n    route: [{destination: {host: web.default.svc.cluster.local}}]\n---\n${svc('web')}---\n${RA}metadata: {name: jwt, namespace: mesh-system}\nspec:\n  selector: {matchLabels: {mesh: ingressgateway}}\n  jwtRules: [{issuer: "https://issuer.example.com", jwksUri: "https://issuer.example.com/jwks"}]\n`,
  },
  {
    code: 'IST0150',
    input: `${SVC}metadata: {name: ext}\nspec:\n  type: ExternalName\n  externalName: api.example.com\n  ports:\n  - name: tcp\n    port: 443\n`,
    line: 'Warning [IST0150] (Service default/ext case.yaml:9) Port name for ExternalName service is invalid. Proxy may prevent tcp named ports and unmatched traffic for ports serving TCP protocol from being forwarded correctly',
    fixed: `${SVC}metadata: {name: ext}\nspec:\n  type: ExternalName\n  externalName: api.example.com\n  ports:\n  - name: https\n    port: 443\n`,
  },
  {
    code: 'IST0151',
    input: `${EF}metadata: {name: lua}\nspec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    patch:\n      operation: INSERT_BEFORE\n      value:\n        name: envoy.filters.http.lua\n        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}\n`,
    line: 'Warning [IST0151] (EnvoyFilter default/lua case.yaml:1) This EnvoyFilter does not have a priority and has a relative patch operation set which can cause the EnvoyFilter not to be applied. Using the INSERT_FIRST of ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.',
    fixed: `${EF}metadata: {name: lua}\nspec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    patch:\n      operation: INSERT_FIRST\n      value:\n        name: envoy.filters.http.lua\n        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}\n`,
  },
  {
    code: 'IST0152',
    input: `${EF}metadata: {name: replace}\nspec:\n  configPatches:\n  - applyTo: CLUSTER\n    patch: {operation: REPLACE, value: {name: x}}\n`,
    line: 'Error [IST0152] (EnvoyFilter default/replace case.yaml:1) The REPLACE operation is only valid for HTTP_FILTER and NETWORK_FILTER.',
    fixed: `${EF}metadata: {name: replace}\nspec:\n  configPatches:\n  - applyTo: CLUSTER\n    patch: {operation: MERGE, value: {name: x}}\n`,
  },
  {
    code: 'IST0153',
    input: `${EF}metadata: {name: add}\nspec:\n  configPatches:\n  - applyTo: HTTP_ROUTE\n    patch: {operation: ADD, value: {name: x}}\n`,
    line: 'Error [IST0153] (EnvoyFilter default/add case.yaml:1) The ADD operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.',
    fixed: `${EF}metadata: {name: add}\nspec:\n  configPatches:\n  - applyTo: HTTP_ROUTE\n    patch: {operation: MERGE, value: {name: x}}\n`,
  },
  {
    code: 'IST0154',
    input: `${EF}metadata: {name: remove}\nspec:\n  configPatches:\n  - applyTo: ROUTE_CONFIGURATION\n    patch: {operation: REMOVE}\n`,
    line: 'Error [IST0154] (EnvoyFilter default/remove case.yaml:1) The REMOVE operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.',
    fixed: `${EF}metadata: {name: remove}\nspec:\n  configPatches:\n  - applyTo: VIRTUAL_HOST\n    patch: {operation: REMOVE}\n`,
  },
  {
    code: 'IST0155',
    input: `${EF}metadata: {name: a-versioned}\nspec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {proxy: {proxyVersion: '^1\\.26.*'}, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}\n    patch: {operation: INSERT_FIRST, value: {name: a, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}}}\n---\n${EF}metadata: {name: b-after}\nspec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    patch: {operation: INSERT_AFTER, value: {name: a, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}}}\n`,
    line: 'Warning [IST0155] (EnvoyFilter default/a-versioned case.yaml:1) This EnvoyFilter does not have a priority and has a relative patch operation (NSTERT_BEFORE/AFTER, REPLACE, MERGE, DELETE) and proxyVersion set which can cause the EnvoyFilter not to be applied during an upgrade. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.'.replace(
      'a-versioned case.yaml:1',
      'b-after case.yaml:10',
    ),
    fixed: `${EF}metadata: {name: a-versioned}\nspec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {proxy: {proxyVersion: '^1\\.26.*'}, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}\n    patch: {operation: INSERT_FIRST, value: {name: a, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}}}\n---\n${EF}metadata: {name: b-after}\nspec:\n  priority: 10\n  configPatches:\n  - applyTo: HTTP_FILTER\n    patch: {operation: INSERT_AFTER, value: {name: a, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}}}\n`,
  },
  {
    code: 'IST0157',
    input: `${TEL}metadata: {name: logs}\nspec:\n  accessLogging: [{}]\n`,
    line: 'Warning [IST0157] (Telemetry default/logs case.yaml:1) The Telemetry logs in namespace "default" with empty providers will be ignored.',
    fixed: `${TEL}metadata: {name: logs}\nspec:\n  accessLogging: [{providers: [{name: envoy}]}]\n`,
  },
  {
    code: 'IST0158',
    input: `${CM}metadata: {name: mesh-sidecar-injector, namespace: mesh-system}\ndata:\n  values: '{"global": {"hub": "docker.io/mesh", "tag": "1.26.0", "proxy": {"image": "proxyv2"}}}'\n---\n${NS}metadata: {name: shop, labels: {mesh-injection: enabled}}\n---\n${POD}metadata: {name: web, namespace: shop}\nspec: {containers: [{name: mesh-proxy, image: docker.io/mesh/proxyv2:1.25.0}]}\n`,
    line: 'Warning [IST0158] (Namespace shop case.yaml:7) The Mesh proxy images of the pods running in the namespace do not match the image defined in the injection configuration (pod names: [web]). This often happens after upgrading the Mesh control-plane and can be fixed by redeploying the pods.',
    fixed: `${CM}metadata: {name: mesh-sidecar-injector, namespace: mesh-system}\ndata:\n  values: '{"global": {"hub": "docker.io/mesh", "tag": "1.26.0", "proxy": {"image": "proxyv2"}}}'\n---\n${NS}metadata: {name: shop, labels: {mesh-injection: enabled}}\n---\n${POD}metadata: {name: web, namespace: shop}\nspec: {containers: [{name: mesh-proxy, image: docker.io/mesh/proxyv2:1.26.0}]}\n`,
  },
  {
    code: 'IST0159',
    input: `${meshPod('web', 'app: web')}---\n${TEL}metadata:\n  name: a\nspec: {selector: {matchLabels: {app: web}}}\n---\n${TEL}metadata: {name: b}\nspec: {selector: {matchLabels: {app: web}}}\n`,
    line: 'Error [IST0159] (Telemetry default/a case.yaml:12) The Telemetries [a b] in namespace "default" select the same workload pod "web", which can lead to undefined behavior.',
    fixed: `${meshPod('web', 'app: web')}---\n${TEL}metadata:\n  name: a\nspec: {selector: {matchLabels: {app: web}}}\n`,
  },
  {
    code: 'IST0160',
    input: `${TEL}metadata: {name: a}\nspec: {tracing: [{providers: [{name: zipkin}]}]}\n---\n${TEL}metadata: {name: b}\nspec: {metrics: [{providers: [{name: prometheus}]}]}\n`,
    line: 'Error [IST0160] (Telemetry default/a case.yaml:1) The Telemetries [a b] in namespace "default" have no workload selector, which can lead to undefined behavior.',
    fixed: `${TEL}metadata: {name: a}\nspec: {tracing: [{providers: [{name: zipkin}]}], metrics: [{providers: [{name: prometheus}]}]}\n`,
  },
  {
    code: 'IST0161',
    input: `${GW}metadata: {name: gw}\nspec:\n  selector: {mesh: ingressgateway}\n  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [a.example.com]\n    tls:\n      mode: SIMPLE\n      credentialName: cert\n---\n${SECRET}metadata: {name: cert, namespace: mesh-system}\ntype: kubernetes.io/tls\ndata: {tls.crt: bm90IGEgY2VydA==, tls.key: bm90IGEga2V5}\n`,
    line: 'Error [IST0161] (Gateway default/gw case.yaml:11) The credential referenced by the Gateway gw in namespace mesh-system is invalid, which can cause the traffic not to work as expected.',
    fixed: `${GW}metadata: {name: gw}\nspec:\n  selector: {mesh: ingressgateway}\n  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [a.example.com]\n    tls:\n      mode: SIMPLE\n      credentialName: cert\n---\n${SECRET}metadata: {name: cert, namespace: mesh-system}\ntype: kubernetes.io/tls\nstringData:\n  tls.key: key\n  tls.crt: |\n${CERT.split(
      '\n',
    )
      .map((l) => `    ${l}`)
      .join('\n')}\n`,
  },
  {
    code: 'IST0162',
    input: `${meshPod('gw', 'app: gw', 'edge')}---\n${svc('gw', 'edge', '  - {name: http, port: 80, targetPort: 8080}')}---\n${GW}metadata: {name: gw, namespace: edge}\nspec:\n  selector:\n    app: gw\n  servers: [{port: {number: 9090, name: http, protocol: HTTP}, hosts: ["*"]}]\n`,
    line: 'Warning [IST0162] (Gateway edge/gw case.yaml:22) The gateway is listening on a target port (port 9090) that is not defined in the Service associated with its workload instances (Pod selector app=gw). If you need to access the gateway port through the gateway Service, it will not be available.',
    fixed: `${meshPod('gw', 'app: gw', 'edge')}---\n${svc('gw', 'edge', '  - {name: http, port: 80, targetPort: 8080}')}---\n${GW}metadata: {name: gw, namespace: edge}\nspec:\n  selector:\n    app: gw\n  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: ["*"]}]\n`,
  },
  {
    code: 'IST0163',
    input: `${VWC}metadata: {name: mesh-validator-external}\nwebhooks:\n- name: rev.validation.mesh.io\n  clientConfig: {}\n`,
    line: 'Warning [IST0163] (ValidatingWebhookConfiguration mesh-validator-external case.yaml:1) The hostname () that was provided for the webhook (rev.validation.mesh.io) to reach the ingress gateway on the external control plane cluster is blank. Traffic may not flow properly.',
    fixed: `${VWC}metadata: {name: mesh-validator-external}\nwebhooks:\n- name: rev.validation.mesh.io\n  clientConfig: {url: "https://meshd.example.com:15017/validate"}\n`,
  },
  {
    code: 'IST0164',
    input: `${MWC}metadata: {name: mesh-sidecar-injector-external}\nwebhooks:\n- name: rev.namespace.sidecar-injector.mesh.io\n  clientConfig: {url: "https://203.0.113.7:15017/inject"}\n`,
    line: 'Info [IST0164] (MutatingWebhookConfiguration mesh-sidecar-injector-external case.yaml:1) The address (https://203.0.113.7:15017/inject) that was provided for the webhook (rev.namespace.sidecar-injector.mesh.io) to reach the ingress gateway on the external control plane cluster is an IP address. This is not recommended for a production environment.',
    fixed: `${MWC}metadata: {name: mesh-sidecar-injector-external}\nwebhooks:\n- name: rev.namespace.sidecar-injector.mesh.io\n  clientConfig: {url: "https://meshd.example.com:15017/inject"}\n`,
  },
  {
    code: 'IST0165',
    input: `${VS}metadata: {name: web}\nspec:\n  hosts: [web.example.com]\n  gateways:\n  - gw-mesh-autogenerated-k8s-gateway-http\n  http: [{route: [{destination: {host: web}}]}]\n---\n${svc('web')}`,
    line: 'Warning [IST0165] (VirtualService default/web case.yaml:7) Gateway reference in VirtualService default/web is to an implementation-generated internal Gateway: gw-mesh-autogenerated-k8s-gateway-http.',
    fixed: `${VS}metadata: {name: web}\nspec:\n  hosts: [web.example.com]\n  gateways:\n  - gw\n  http: [{route: [{destination: {host: web}}]}]\n---\n${svc('web')}---\n${GW}metadata: {name: gw}\nspec:\n  selector: {mesh: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [web.example.com]}]\n`,
  },
  {
    code: 'IST0167',
    input: `${NS}metadata: {name: amb, labels: {mesh.io/dataplane-mode: ambient}}\n---\n${SC}metadata: {name: default, namespace: amb}\nspec: {egress: [{hosts: ["./*"]}]}\n`,
    line: 'Warning [IST0167] (Sidecar amb/default case.yaml:5) The policy has no impact: namespace is in ambient mode, the policy has no impact.',
    fixed: `${NS}metadata: {name: amb, labels: {mesh-injection: enabled}}\n---\n${SC}metadata: {name: default, namespace: amb}\nspec: {egress: [{hosts: ["./*"]}]}\n`,
  },
  // --- mesh's own codes
  {
    code: 'MESH0101',
    input: `${VS}metadata: {name: web}\nspec:\n  hosts: [web]\n  http:\n  - match:\n    - headers:\n        "@request.auth.claims.group":\n          exact: admin\n    route: [{destination: {host: web}}]\n---\n${svc('web')}`,
    line: 'Error [MESH0101] (VirtualService default/web case.yaml:10) The route matches JWT claim @request.auth.claims.group but the VirtualService is bound to no gateway: only gateways validate tokens, so sidecars never see claims and the match can never succeed. Bind it to the gateway that validates the token.',
    fixed: `${VS}metadata: {name: web}\nspec:\n  hosts: [web]\n  http:\n  - match:\n    - headers:\n        x-group:\n          exact: admin\n    route: [{destination: {host: web}}]\n---\n${svc('web')}`,
  },
  {
    code: 'MESH0102',
    input: `${GW}metadata: {name: edge, namespace: edge}\nspec:\n  selector: {app: edge-gateway}\n  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: ["*"]}]\n---\n${VS}metadata: {name: web, namespace: edge}\nspec:\n  hosts: ["*"]\n  gateways: [edge]\n  http:\n  - match: [{headers: {"@request.auth.claims.group": {exact: admin}}}]\n    route: [{destination: {host: web.default.svc.cluster.local}}]\n---\n${svc('web')}`,
    line: 'Error [MESH0102] (VirtualService edge/web case.yaml:15) The route matches JWT claim @request.auth.claims.group at gateway edge/edge, but no RequestAuthentication selects that gateway (selector app=edge-gateway): without token validation there are no claims and the route never matches.',
    fixed: `${GW}metadata: {name: edge, namespace: edge}\nspec:\n  selector: {app: edge-gateway}\n  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: ["*"]}]\n---\n${VS}metadata: {name: web, namespace: edge}\nspec:\n  hosts: ["*"]\n  gateways: [edge]\n  http:\n  - match: [{headers: {"@request.auth.claims.group": {exact: admin}}}]\n    route: [{destination: {host: web.default.svc.cluster.local}}]\n---\n${svc('web')}---\n${RA}metadata: {name: jwt, namespace: edge}\nspec:\n  selector: {matchLabels: {app: edge-gateway}}\n  jwtRules: [{issuer: "https://issuer.example.com", jwksUri: "https://issuer.example.com/jwks"}]\n`,
  },
  {
    code: 'MESH0103',
    input: `${GW}metadata: {name: edge, namespace: edge}\nspec:\n  selector: {app: edge-gateway}\n  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: ["*"]}]\n---\n${RA}metadata: {name: jwt, namespace: edge}\nspec:\n  selector: {matchLabels: {app: edge-gateway}}\n  jwtRules: [{issuer: "https://issuer.example.com", jwksUri: "https://issuer.example.com/jwks"}]\n---\n${VS}metadata: {name: web, namespace: edge}\nspec:\n  hosts: ["*"]\n  gateways: [edge]\n  http:\n  - match: [{headers: {"@request.auth.claims.iss": {exact: "https://login.example.com"}}}]\n    route: [{destination: {host: web.default.svc.cluster.local}}]\n---\n${svc('web')}`,
    line: 'Error [MESH0103] (VirtualService edge/web case.yaml:22) The route matches issuer "https://login.example.com" at gateway edge/edge, but no RequestAuthentication selecting that gateway lists it (issuers: [https://issuer.example.com]): tokens from it are never validated there.',
    fixed: `${GW}metadata: {name: edge, namespace: edge}\nspec:\n  selector: {app: edge-gateway}\n  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: ["*"]}]\n---\n${RA}metadata: {name: jwt, namespace: edge}\nspec:\n  selector: {matchLabels: {app: edge-gateway}}\n  jwtRules: [{issuer: "https://issuer.example.com", jwksUri: "https://issuer.example.com/jwks"}]\n---\n${VS}metadata: {name: web, namespace: edge}\nspec:\n  hosts: ["*"]\n  gateways: [edge]\n  http:\n  - match: [{headers: {"@request.auth.claims.iss": {exact: "https://issuer.example.com"}}}]\n    route: [{destination: {host: web.default.svc.cluster.local}}]\n---\n${svc('web')}`,
  },
  {
    code: 'MESH0104',
    input: `${meshPod('web', 'app: web')}---\n${AP}metadata: {name: deny-admin}\nspec:\n  selector: {matchLabels: {app: web}}\n  action: DENY\n  rules:\n  - to:\n    - operation:\n        hosts:\n        - admin.example.com\n`,
    line: 'Warning [MESH0104] (AuthorizationPolicy default/deny-admin case.yaml:19) The DENY rule matches host "admin.example.com" but not "admin.example.com:*": a request whose Host header carries a port (admin.example.com:8080) is not denied. List both forms, or use a wildcard port.',
    fixed: `${meshPod('web', 'app: web')}---\n${AP}metadata: {name: deny-admin}\nspec:\n  selector: {matchLabels: {app: web}}\n  action: DENY\n  rules:\n  - to:\n    - operation:\n        hosts:\n        - admin.example.com\n        - admin.example.com:*\n`,
  },
];

for (const c of cases) {
  t.test(`${c.code}: reported with its exact line, and not once fixed`, async (t) => {
    const lines = run(c.input, c.meshConfig);
    const mine = lines.filter((l) => l.includes(`[${c.code}]`));
    if (!mine.includes(c.line)) t.same(mine, [c.line], `expected line among ${c.code} messages`);
    else t.pass(`${c.code} line`);
    const after = run(c.fixed, c.meshConfig).filter((l) => l.includes(`[${c.code}]`));
    t.same(after, [], 'the fixed input has no such message');
  });
}

t.test('every implemented code has a case', async (t) => {
  const covered = new Set(cases.map((c) => c.code));
  // Codes of analyzers mesh does not run (cluster, upgrade, multicluster, Gateway API status, alpha annotations).
  const notImplemented = new Set([
    'IST0001',
    'IST0126',
    'IST0136',
    'IST0141',
    'IST0142',
    'IST0143',
    'IST0156',
    'IST0166',
    'IST0168',
    'IST0169',
    'IST0170',
    'IST0171',
    'IST0172',
    'IST0173',
    'IST0174',
  ]);
  const { ALL_MESSAGE_TYPES } = await import('../../src/analysis/messages');
  const missing = ALL_MESSAGE_TYPES.map((m) => m.code).filter((code) => !covered.has(code) && !notImplemented.has(code));
  t.same(missing, []);
});
