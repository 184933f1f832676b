// JwtRequirement trees (Envoy's jwt_authn Verifier): provider_name, provider_and_audiences,
// requires_any, requires_all, allow_missing, allow_missing_or_failed, and "no requirement". Built once
// per config; a request walks the tree, synchronously unless a child waits for a key fetch. Children
// of a group all start (like Envoy, which runs them concurrently); the group settles as soon as its
// outcome is known.
import type { JwtRequirement } from '../../../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import { ConfigError } from '../../../common/config-error';
import { authenticate, type AuthenticatorSpec, type Outcome, type ProviderSet, type VerifyContext } from './authenticator';
import { Extractor } from './extractor';
import { AudienceChecker, type ProviderRuntime } from './provider';
import { Status } from '../../../../lib/jwt-verify/status';
import type { JwtAuthnStats } from './stats';

export interface Verifier {
  verify(ctx: VerifyContext): Outcome;
}

class ProviderVerifier implements Verifier {
  private readonly extractor: Extractor;
  private readonly spec: AuthenticatorSpec;
  constructor(provider: ProviderRuntime, audiences: AudienceChecker | undefined, providers: ProviderSet, stats: JwtAuthnStats) {
    this.extractor = new Extractor([provider.locations]);
    this.spec = { provider, audiences, allowFailed: false, allowMissing: false, providers, stats };
  }
  verify(ctx: VerifyContext): Outcome {
    this.extractor.sanitizeHeaders(ctx.headers);
    return authenticate(this.spec, this.extractor.extract(ctx.headers), ctx);
  }
}

/** allow_missing / allow_missing_or_failed: tokens of any provider, matched by issuer. */
class AllowVerifier implements Verifier {
  private readonly extractor: Extractor;
  private readonly spec: AuthenticatorSpec;
  constructor(allowFailed: boolean, providers: ProviderSet, stats: JwtAuthnStats) {
    this.extractor = new Extractor([...providers.byName.values()].map((p) => p.locations));
    this.spec = { provider: undefined, audiences: undefined, allowFailed, allowMissing: true, providers, stats };
  }
  verify(ctx: VerifyContext): Outcome {
    this.extractor.sanitizeHeaders(ctx.headers);
    return authenticate(this.spec, this.extractor.extract(ctx.headers), ctx);
  }
}

const allowAll: Verifier = { verify: () => Status.Ok };

type Decide = (i: number, s: Status, completed: number) => Status | undefined;

/**
 * Starts children in order until the group is decided; `decide` sees each child's status as it
 * completes and returns the group's status once it is known (at the latest when all completed).
 * Children that answer synchronously cost no promise and no closure.
 */
function runGroup(children: readonly Verifier[], ctx: VerifyContext, decide: Decide): Outcome {
  let completed = 0;
  for (let i = 0; i < children.length; i++) {
    const r = children[i]!.verify(ctx);
    if (typeof r !== 'number') return settleAsync(children, ctx, decide, i, r, completed);
    const d = decide(i, r, ++completed);
    if (d !== undefined) return d;
  }
  throw new Error('jwt_authn: a requirement group completed without an outcome');
}

function settleAsync(
  children: readonly Verifier[],
  ctx: VerifyContext,
  decide: Decide,
  first: number,
  pending: Promise<Status>,
  done: number,
): Promise<Status> {
  return new Promise<Status>((resolve, reject) => {
    let result: Status | undefined;
    let failed = false;
    let completed = done;
    const onChild = (i: number, s: Status) => {
      if (result !== undefined || failed) return;
      result = decide(i, s, ++completed);
      if (result !== undefined) resolve(result);
    };
    // a bug in a child must fail the request (the HCM answers 500), not leave it hanging
    const onError = (e: unknown) => {
      if (result !== undefined || failed) return;
      failed = true;
      reject(e);
    };
    pending.then((s) => onChild(first, s), onError);
    for (let i = first + 1; i < children.length && result === undefined && !failed; i++) {
      const r = children[i]!.verify(ctx);
      if (typeof r === 'number') onChild(i, r);
      else r.then((s) => onChild(i, s), onError);
    }
  });
}

class AnyVerifier implements Verifier {
  constructor(
    private readonly children: readonly Verifier[],
    private readonly allowMissingOrFailed: boolean,
    private readonly allowMissing: boolean,
  ) {}

  /** The group status once every child failed: a real failure beats "wrong issuer", which beats "no token". */
  private aggregate(statuses: readonly Status[]): Status {
    let final = Status.JwtMissed;
    for (const c of statuses) {
      if ((c !== Status.JwtMissed && c !== Status.JwtUnknownIssuer) || final === Status.JwtMissed) final = c;
    }
    if (this.allowMissingOrFailed) return Status.Ok;
    if (this.allowMissing && final === Status.JwtMissed) return Status.Ok;
    return final;
  }

  verify(ctx: VerifyContext): Outcome {
    const n = this.children.length;
    // the usual case (Istio: one provider plus allow_missing) answers synchronously, without closures
    if (n === 1) {
      const r = this.children[0]!.verify(ctx);
      return typeof r === 'number' ? (r === Status.Ok ? r : this.aggregate([r])) : r.then((s) => (s === Status.Ok ? s : this.aggregate([s])));
    }
    const statuses = new Array<Status>(n);
    return runGroup(this.children, ctx, (i, s, completed) => {
      statuses[i] = s;
      if (s === Status.Ok) return Status.Ok;
      return completed < n ? undefined : this.aggregate(statuses);
    });
  }
}

class AllVerifier implements Verifier {
  constructor(private readonly children: readonly Verifier[]) {}
  verify(ctx: VerifyContext): Outcome {
    return runGroup(this.children, ctx, (_i, s, completed) => (s !== Status.Ok || completed === this.children.length ? s : undefined));
  }
}

export interface VerifierDeps {
  providers: ProviderSet;
  stats: JwtAuthnStats;
}

/** Compiles a requirement; unknown providers and malformed lists are config errors. */
export function createVerifier(r: JwtRequirement | undefined, deps: VerifierDeps, where: string): Verifier {
  const t = r?.requiresType;
  const provider = (name: string, w: string): ProviderRuntime => {
    const p = deps.providers.byName.get(name);
    if (!p) throw new ConfigError(`${w}: Required provider ['${name}'] is not configured.`);
    return p;
  };
  switch (t?.case) {
    case 'providerName':
      return new ProviderVerifier(provider(t.value, `${where}.provider_name`), undefined, deps.providers, deps.stats);
    case 'providerAndAudiences': {
      const pa = t.value;
      const p = provider(pa.providerName, `${where}.provider_and_audiences.provider_name`);
      const aud = pa.audiences.length > 0 ? new AudienceChecker(pa.audiences) : undefined;
      return new ProviderVerifier(p, aud, deps.providers, deps.stats);
    }
    case 'requiresAny': {
      const reqs = t.value.requirements;
      if (reqs.length < 2) throw new ConfigError(`${where}.requires_any.requirements: value must contain at least 2 item(s)`);
      let allowMissingOrFailed = false;
      let allowMissing = false;
      const children: Verifier[] = [];
      reqs.forEach((c, i) => {
        if (c.requiresType.case === 'allowMissingOrFailed') allowMissingOrFailed = true;
        else if (c.requiresType.case === 'allowMissing') allowMissing = true;
        else children.push(createVerifier(c, deps, `${where}.requires_any.requirements[${i}]`));
      });
      if (children.length === 0) children.push(new AllowVerifier(allowMissingOrFailed, deps.providers, deps.stats));
      return new AnyVerifier(children, allowMissingOrFailed, allowMissing);
    }
    case 'requiresAll': {
      const reqs = t.value.requirements;
      if (reqs.length < 2) throw new ConfigError(`${where}.requires_all.requirements: value must contain at least 2 item(s)`);
      return new AllVerifier(reqs.map((c, i) => createVerifier(c, deps, `${where}.requires_all.requirements[${i}]`)));
    }
    case 'allowMissingOrFailed':
      return new AllowVerifier(true, deps.providers, deps.stats);
    case 'allowMissing':
      return new AllowVerifier(false, deps.providers, deps.stats);
    default:
      return allowAll;
  }
}
