// resolv.conf as miekg/dns's ClientConfigFromReader reads it for Istio's agent (and istio-iptables):
// `nameserver` lines in order, the last `search` (or `domain`) line, port 53.

export interface ResolvConf {
  /** Nameserver addresses in file order. */
  servers: string[];
  /** Search domains as written (`default.svc.cluster.local`). */
  search: string[];
  port: number;
}

export function parseResolvConf(text: string): ResolvConf {
  const out: ResolvConf = { servers: [], search: [], port: 53 };
  for (const raw of text.split('\n')) {
    // glibc ends a line at a comment character; miekg/dns skips lines starting with one: same for real files
    const line = raw.replace(/[#;].*$/, '').trim();
    if (line === '') continue;
    const f = line.split(/\s+/);
    switch (f[0]) {
      case 'nameserver':
        if (f[1]) out.servers.push(f[1]);
        break;
      case 'domain':
        out.search = f[1] ? [f[1]] : [];
        break;
      case 'search':
        out.search = f.slice(1);
        break;
    }
  }
  return out;
}
