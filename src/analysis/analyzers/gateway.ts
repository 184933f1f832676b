// Gateway analyzers (Istio's analyzers/gateway): selectors that select nothing, ports the gateway's
// Service does not expose, credentialName secrets, duplicate certificates and conflicting servers.
import { X509Certificate } from 'node:crypto';
import { isObject } from '../../config/values';
import { MESSAGES } from '../messages';
import { type Analyzer, fullName, type Resource, specOf } from '../model';
import { firstSelectorKey, lineOf, selectorString, setMatches } from '../util';

function selectorLine(r: Resource, sel: string): number | undefined {
  return lineOf(r, ['spec', 'selector', firstSelectorKey(sel)]);
}

export const ingressGatewayPort: Analyzer = {
  name: 'gateway.IngressGatewayPortAnalyzer',
  description: "Checks a gateway's ports against the gateway's Kubernetes service ports",
  inputs: ['Gateway', 'Pod', 'Service'],
  analyze(ctx) {
    for (const r of ctx.list('Gateway')) {
      const gw = specOf(r);
      const selector: Record<string, string> = gw.selector ?? {};
      const sel = selectorString(selector);
      const servicePorts = new Set<number>();
      const portMapping = new Map<number, number>();
      const matched = ctx.list('Pod').filter((p) => setMatches(selector, p.labels));
      for (const pod of matched)
        for (const svc of ctx.list('Service')) {
          if (svc.namespace !== pod.namespace) continue;
          const s = specOf(svc);
          if (!setMatches(s.selector ?? {}, pod.labels)) continue;
          for (const port of Array.isArray(s.ports) ? s.ports.filter(isObject) : []) {
            // Kubernetes defaults the protocol to TCP.
            if ((port.protocol ?? 'TCP') !== 'TCP') continue;
            const tp =
              typeof port.targetPort === 'number' ? port.targetPort : /^\d+$/.test(String(port.targetPort ?? '')) ? Number(port.targetPort) : 0;
            if (tp !== 0) {
              servicePorts.add(tp);
              if (!portMapping.has(port.port)) portMapping.set(port.port, tp);
            } else servicePorts.add(port.port);
          }
        }
      if (matched.length === 0) {
        ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['selector', sel], selectorLine(r, sel));
        continue;
      }
      // The files-only stand-in gateway has no real Service: a gateway that listens on its own
      // ports (as mesh's gateways do without a cluster) is not told its ports are unexposed.
      if (matched.every((p) => p.synthetic)) continue;
      for (const server of gw.servers ?? []) {
        if (!server.port) continue;
        const n = server.port.number;
        if (!servicePorts.has(n) && !portMapping.has(n)) ctx.report(MESSAGES.GatewayPortNotDefinedOnService, r, [n, sel], selectorLine(r, sel));
      }
    }
  },
};

/** Secret data as the API server would hold it: `data` (base64) with `stringData` merged over it. */
function secretData(secret: Resource): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const data = isObject(secret.object.data) ? secret.object.data : {};
  for (const [k, v] of Object.entries(data)) out.set(k, Buffer.from(String(v ?? ''), 'base64'));
  const sd = isObject(secret.object.stringData) ? secret.object.stringData : {};
  for (const [k, v] of Object.entries(sd)) out.set(k, Buffer.from(String(v ?? ''), 'utf8'));
  return out;
}

/** kube.ExtractCertInfo + xds.ValidateCertificate: a certificate and key are present and the first certificate is current. */
function isValidSecret(secret: Resource): boolean {
  const d = secretData(secret);
  const has = (...keys: string[]): boolean => keys.every((k) => (d.get(k)?.length ?? 0) > 0);
  const cert = has('cert', 'key') ? d.get('cert')! : has('tls.crt', 'tls.key') ? d.get('tls.crt')! : undefined;
  if (!cert) return false;
  const pem = /-----BEGIN [^-]+-----[\s\S]*?-----END [^-]+-----/.exec(cert.toString('utf8'));
  if (!pem) return false;
  try {
    const x = new X509Certificate(pem[0]);
    const now = Date.now();
    return now >= Date.parse(x.validFrom) && now <= Date.parse(x.validTo);
  } catch {
    return false;
  }
}

export const secrets: Analyzer = {
  name: 'gateway.SecretAnalyzer',
  description: "Checks a gateway's referenced secrets for correctness",
  inputs: ['Gateway', 'Pod', 'Secret'],
  analyze(ctx) {
    for (const r of ctx.list('Gateway')) {
      const gw = specOf(r);
      const selector: Record<string, string> = gw.selector ?? {};
      const pod = ctx.list('Pod').find((p) => setMatches(selector, p.labels));
      if (!pod) {
        const sel = selectorString(selector);
        ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['selector', sel], selectorLine(r, sel));
        continue;
      }
      const gwNs = pod.namespace;
      (gw.servers ?? []).forEach((srv: { tls?: { credentialName?: string } }, i: number) => {
        const cn = srv.tls?.credentialName;
        if (!cn) return;
        const line = lineOf(r, ['spec', 'servers', i, 'tls', 'credentialName']);
        const slash = cn.indexOf('/');
        const secret = slash >= 0 ? ctx.find('Secret', cn.slice(0, slash), cn.slice(slash + 1)) : ctx.find('Secret', gwNs, cn);
        if (!secret) ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['credentialName', cn], line);
        else if (!isValidSecret(secret)) ctx.report(MESSAGES.InvalidGatewayCredential, r, [r.name, gwNs], line);
      });
    }
  },
};

interface ServerTLS {
  credentialName?: string;
  serverCertificate?: string;
  privateKey?: string;
}

function sameCertificate(a: ServerTLS, b: ServerTLS): boolean {
  if (a.credentialName && b.credentialName) return a.credentialName === b.credentialName;
  if (!a.credentialName && !b.credentialName && a.serverCertificate && b.serverCertificate && a.serverCertificate === b.serverCertificate)
    return Boolean(a.privateKey && b.privateKey && a.privateKey === b.privateKey);
  return false;
}

/** selectorSubset: every pair of `x` is in `y`. */
function selectorSubset(x: Readonly<Record<string, string>>, y: Readonly<Record<string, string>>): boolean {
  return Object.entries(x).every(([k, v]) => y[k] === v);
}

export const certificates: Analyzer = {
  name: 'gateway.CertificateAnalyzer',
  description: 'Checks a gateway certificate',
  inputs: ['Gateway'],
  analyze(ctx) {
    for (const cur of ctx.list('Gateway')) {
      const cg = specOf(cur);
      const sel: Record<string, string> = cg.selector ?? {};
      const others = ctx.list('Gateway').filter((g) => Object.keys(sel).length === 0 || selectorSubset(sel, specOf(g).selector ?? {}));
      for (const other of others) {
        if (other === cur) continue;
        for (const cs of cg.servers ?? [])
          for (const os of specOf(other).servers ?? []) {
            if (!cs.tls || !os.tls) continue;
            if (sameCertificate(cs.tls, os.tls))
              ctx.report(MESSAGES.GatewayDuplicateCertificate, cur, [[fullName(cur), fullName(other)]], lineOf(cur, ['metadata', 'name']));
          }
      }
    }
  },
};

export const conflictingGateways: Analyzer = {
  name: 'gateway.ConflictingGatewayAnalyzer',
  description: "Checks a gateway's selector, port number and hosts",
  inputs: ['Gateway', 'Pod'],
  analyze(ctx) {
    // selector~port → gateway → host → bind
    const map = new Map<string, Map<string, Map<string, string>>>();
    for (const r of ctx.list('Gateway')) {
      const gw = specOf(r);
      const sel = selectorString(gw.selector ?? {});
      for (const server of gw.servers ?? []) {
        const key = `${sel}~${server.port?.number ?? 0}`;
        const byGw = map.get(key) ?? new Map<string, Map<string, string>>();
        const hb = new Map<string, string>();
        for (const h of server.hosts ?? []) hb.set(h, server.bind ?? '');
        byGw.set(fullName(r), hb);
        map.set(key, byGw);
      }
    }
    const parseSel = (s: string): Record<string, string> =>
      Object.fromEntries(
        s
          .split(',')
          .map((p) => p.split('='))
          .filter((kv) => kv.length === 2),
      );
    for (const r of ctx.list('Gateway')) {
      const gw = specOf(r);
      const selector: Record<string, string> = gw.selector ?? {};
      const sel = selectorString(selector);
      const hit = new Map<string, Map<string, Map<string, string>>>();
      for (const [key, v] of map) {
        const xSel = key.slice(0, key.lastIndexOf('~'));
        let matched = sel === xSel;
        if (!matched && (xSel.includes(sel) || sel.includes(xSel))) {
          const x = parseSel(xSel);
          matched = ctx.list('Pod').some((p) => setMatches(selector, p.labels) && setMatches(x, p.labels));
        }
        if (matched) hit.set(key, v);
      }
      if (sel !== '' && hit.size === 0) {
        ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['selector', sel], selectorLine(r, sel));
        continue;
      }
      for (const server of gw.servers ?? []) {
        const port = String(server.port?.number ?? 0);
        const conflicting: string[] = [];
        for (const [key, values] of hit) {
          if (key.slice(key.lastIndexOf('~') + 1) !== port) continue;
          for (const [name, hostsBind] of values) {
            // model.CheckDuplicates: a host this server lists, bound to the same address.
            if (name !== fullName(r) && (server.hosts ?? []).some((h: string) => hostsBind.has(h) && hostsBind.get(h) === (server.bind ?? '')))
              conflicting.push(name);
          }
        }
        if (conflicting.length > 0)
          ctx.report(MESSAGES.ConflictingGateways, r, [conflicting.sort().join(','), sel, port, (server.hosts ?? []).join(',')]);
      }
    }
  },
};
