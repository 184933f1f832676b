// prom-client's metric classes by their own files (src/lib/metrics.ts says why); typed as the package's index.
declare module 'prom-client/lib/registry' {
  import { Registry } from 'prom-client';
  export = Registry;
}
declare module 'prom-client/lib/counter' {
  import { Counter } from 'prom-client';
  export = Counter;
}
declare module 'prom-client/lib/gauge' {
  import { Gauge } from 'prom-client';
  export = Gauge;
}
declare module 'prom-client/lib/histogram' {
  import { Histogram } from 'prom-client';
  export = Histogram;
}
