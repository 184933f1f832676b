// Names, hosts, addresses, ports and labels, with Istio's rules and messages
// (pkg/config/validation/agent, pkg/config/labels). Each check returns the message of the first
// problem, or undefined when the value is valid.
import { ipFamily } from '../../lib/ip';
import { goQuote } from '../../lib/duration';

const DNS1123_LABEL_MAX = 63;
// Istio's label pattern (letters of either case, digits, inner dashes).
const LABEL = '[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?';
const dns1123LabelRe = new RegExp(`^${LABEL}$`);
const wildcardLabelRe = new RegExp(`^(\\*|(\\*|\\*-)?${LABEL})$`);
const QUALIFIED_NAME = '(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const tagKeyRe = new RegExp(`^(${LABEL}(?:\\.${LABEL})*/)?(${QUALIFIED_NAME})$`);
const labelValueRe = new RegExp(`^(${QUALIFIED_NAME})?$`);

export function isDNS1123Label(v: string): boolean {
  return v.length <= DNS1123_LABEL_MAX && dns1123LabelRe.test(v);
}

export function isWildcardDNS1123Label(v: string): boolean {
  return v.length <= DNS1123_LABEL_MAX && wildcardLabelRe.test(v);
}

export function checkDNS1123Preconditions(name: string): string | undefined {
  if (name.length > 255) return `domain name ${goQuote(name)} too long (max 255)`;
  if (name.length === 0) return 'empty domain name not allowed';
  return undefined;
}

export function validateDNS1123Labels(domain: string): string | undefined {
  const parts = domain.split('.');
  const tld = parts[parts.length - 1]!;
  if (/^[+-]?[0-9]+$/.test(tld)) return `domain name ${goQuote(domain)} invalid (top level domain ${goQuote(tld)} cannot be all-numeric)`;
  for (let i = 0; i < parts.length; i++) {
    const label = parts[i]!;
    // A trailing dot (`example.com.`) is an unambiguous absolute name.
    if (i === parts.length - 1 && label === '') return undefined;
    if (!isDNS1123Label(label)) return `domain name ${goQuote(domain)} invalid (label ${goQuote(label)} invalid)`;
  }
  return undefined;
}

export function validateFQDN(fqdn: string): string | undefined {
  return checkDNS1123Preconditions(fqdn) ?? validateDNS1123Labels(fqdn);
}

/** A host that may start with a wildcard label (`*`, `*.example.com`, `*-foo.example.com`). */
export function validateWildcardDomain(domain: string): string | undefined {
  const pre = checkDNS1123Preconditions(domain);
  if (pre) return pre;
  const dot = domain.indexOf('.');
  const first = dot < 0 ? domain : domain.slice(0, dot);
  if (!isWildcardDNS1123Label(first)) return `domain name ${goQuote(domain)} invalid (label ${goQuote(first)} invalid)`;
  if (dot >= 0) return validateDNS1123Labels(domain.slice(dot + 1));
  return undefined;
}

export function validateWildcardDomainForVirtualServiceBoundToGateway(sni: boolean, domain: string): string | undefined {
  const pre = checkDNS1123Preconditions(domain);
  if (pre) return pre;
  const dot = domain.indexOf('.');
  const first = dot < 0 ? domain : domain.slice(0, dot);
  // SNI hosts generated for auto-passthrough (`outbound_.80_._.svc.cluster.local`).
  if (sni && first === 'outbound_') {
    if (!/outbound_.([0-8].*).*/.test(domain)) return `domain name ${goQuote(domain)} invalid (label ${goQuote(first)} invalid)`;
    return undefined;
  }
  if (!isWildcardDNS1123Label(first)) return `domain name ${goQuote(domain)} invalid (label ${goQuote(first)} invalid)`;
  if (dot >= 0) return validateDNS1123Labels(domain.slice(dot + 1));
  return undefined;
}

export function validatePartialWildCard(host: string): string | undefined {
  if (host.includes('*') && host.length !== 1 && !host.startsWith('*.')) return `partial wildcard ${goQuote(host)} not allowed`;
  return undefined;
}

export function validatePort(port: number): string | undefined {
  if (Number.isInteger(port) && port >= 1 && port <= 65535) return undefined;
  return `port number ${port} must be in the range 1..65535`;
}

/** netip.ParseAddr: IPv4 dotted quad or IPv6 (with an optional zone). */
export function isValidIP(addr: string): boolean {
  return ipFamily(addr) !== 0;
}

export function validateIPAddress(addr: string): string | undefined {
  return isValidIP(addr) ? undefined : `${addr} is not a valid IP`;
}

/** netip.ParsePrefix: an address and a prefix length within its family (host bits may be set). */
export function isValidCIDR(s: string): boolean {
  const slash = s.indexOf('/');
  if (slash < 0 || s.indexOf('/', slash + 1) >= 0) return false;
  const addr = s.slice(0, slash);
  const bits = s.slice(slash + 1);
  if (addr.includes('%')) return false; // zones are not allowed in prefixes
  const family = ipFamily(addr);
  if (family === 0 || !/^(0|[1-9][0-9]{0,2})$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/** An address in CIDR notation or a single IP. */
export function validateIPSubnet(subnet: string): string | undefined {
  if ((subnet.match(/\//g) ?? []).length === 1) return isValidCIDR(subnet) ? undefined : `${subnet} is not a valid CIDR block`;
  return validateIPAddress(subnet);
}

/** Istio's labels.Instance.Validate: Kubernetes label keys and values; one message per bad key or value. */
export function validateLabels(labels: Readonly<Record<string, string>> | undefined): Array<{ key: string; message: string }> {
  const out: Array<{ key: string; message: string }> = [];
  for (const [k, v] of Object.entries(labels ?? {})) {
    const m = tagKeyRe.exec(k);
    if (!m) out.push({ key: k, message: `invalid tag key: ${goQuote(k)}` });
    else if (m[1] && m[1].length - 1 > 253) out.push({ key: k, message: `invalid tag key: ${goQuote(k)} (DNS prefix is too long)` });
    else if (m[2]!.length > DNS1123_LABEL_MAX) out.push({ key: k, message: `invalid tag key: ${goQuote(k)} (name is too long)` });
    if (!labelValueRe.test(v)) out.push({ key: k, message: `invalid tag value: ${goQuote(v)}` });
  }
  return out;
}

export function validatePortName(name: string): string | undefined {
  return isDNS1123Label(name) ? undefined : `invalid port name: ${name}`;
}

export function validateUnixAddress(addr: string): string | undefined {
  if (addr.length === 0) return 'unix address must not be empty';
  if (addr.startsWith('@')) return undefined; // abstract socket
  if (!addr.startsWith('/') || addr.endsWith('/')) return `${addr} is not an absolute path to a file`;
  return undefined;
}

export const UNIX_ADDRESS_PREFIX = 'unix://';

// --- Kubernetes object names (apimachinery validation messages)

const K8S_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const k8sLabelRe = new RegExp(`^${K8S_LABEL}$`);
const k8sSubdomainRe = new RegExp(`^${K8S_LABEL}(\\.${K8S_LABEL})*$`);
const dns1035Re = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** Kubernetes IsDNS1123Subdomain: one message per problem. */
export function k8sSubdomainErrors(v: string): string[] {
  const out: string[] = [];
  if (v.length > 253) out.push('must be no more than 253 characters');
  if (!k8sSubdomainRe.test(v))
    out.push(
      "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    );
  return out;
}

/** Kubernetes IsDNS1123Label. */
export function k8sLabelErrors(v: string): string[] {
  const out: string[] = [];
  if (v.length > 63) out.push('must be no more than 63 characters');
  if (!k8sLabelRe.test(v))
    out.push(
      "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    );
  return out;
}

/** Kubernetes IsDNS1035Label (Service names). */
export function k8sDNS1035Errors(v: string): string[] {
  const out: string[] = [];
  if (v.length > 63) out.push('must be no more than 63 characters');
  if (!dns1035Re.test(v))
    out.push(
      "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
    );
  return out;
}

/** Go's %v of a float64: strconv's shortest 'g' form, which switches to an exponent below 1e-4 and from 1e6. */
export function goFloat(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? '+Inf' : '-Inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const [mant, expStr] = x.toExponential().split('e') as [string, string];
  const exp = Number(expStr);
  if (exp < -4 || exp >= 6) {
    const e = Math.abs(exp);
    return `${mant}e${exp < 0 ? '-' : '+'}${e < 10 ? '0' : ''}${e}`;
  }
  return String(x);
}

/** Go's %f (6 decimals). */
export function goFixed(x: number): string {
  return x.toFixed(6);
}

function sidecarOrGatewayHostnamePartErrors(hostname: string, isGateway: boolean): string[] {
  const out: string[] = [];
  if (hostname !== '*' && !hostname.includes('.')) out.push('short names (non FQDN) are not allowed');
  const err = validateWildcardDomain(hostname);
  // Gateways also accept an IP address as the host.
  if (err !== undefined && (!isGateway || !isValidIP(hostname))) out.push(err);
  const partial = validatePartialWildCard(hostname);
  if (partial) out.push(partial);
  return out;
}

/** `namespace/host` (Sidecar egress and Gateway server hosts; gateways also take a bare host). */
export function namespaceSlashHostErrors(hostname: string, isGateway: boolean): string[] {
  const slash = hostname.indexOf('/');
  if (slash < 0) {
    if (isGateway) return sidecarOrGatewayHostnamePartErrors(hostname, true);
    return ['host must be of form namespace/dnsName'];
  }
  const ns = hostname.slice(0, slash);
  const host = hostname.slice(slash + 1);
  const out: string[] = [];
  if (ns.length === 0 || host.length === 0) out.push('config namespace and dnsName in host entry cannot be empty');
  const allowed = isGateway ? ['*', '.'] : ['*', '.', '~'];
  if (!allowed.includes(ns) && !isDNS1123Label(ns)) out.push(`invalid namespace value ${goQuote(ns)} in ${isGateway ? 'gateway' : 'sidecar'}`);
  out.push(...sidecarOrGatewayHostnamePartErrors(host, isGateway));
  return out;
}
