// Who may read credentials (Istio CredentialsController.Authorize): a SubjectAccessReview asks the
// orchestrator whether `system:serviceaccount:<ns>:<sa>` may list Secrets in its namespace; answers are
// cached for a minute (five when allowed), as Istio does. Generation cannot wait for the API, so the first
// question of a service account answers "not yet", and the answer, once in, pushes that namespace's
// secrets again; an expired answer keeps serving while it is asked again.
import type { OrchClient } from '../config/orch/client';
import { registerScope } from '../lib/log';
import type { SecretAuthorizer } from '../xds/gen/sds';

const log = registerScope('ads', 'ads debugging');

const CACHE_TTL_MS = 60_000;

interface Answer {
  value: true | Error;
  expires: number;
}

interface ReviewStatus {
  status?: { allowed?: boolean; reason?: string };
}

export class SecretAccessReviews {
  private readonly answers = new Map<string, Answer>();
  private readonly asking = new Set<string>();

  constructor(
    private readonly client: Pick<OrchClient, 'request'>,
    /** Called with the namespace once an answer arrives that changes what its proxies may read. */
    private readonly onAnswer: (namespace: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  readonly authorize: SecretAuthorizer = (serviceAccount, namespace) => {
    const user = `system:serviceaccount:${namespace}:${serviceAccount}`;
    const got = this.answers.get(user);
    if (!got || got.expires <= this.now()) void this.ask(user, serviceAccount, namespace, got?.value);
    return got?.value;
  };

  private async ask(user: string, serviceAccount: string, namespace: string, before: true | Error | undefined): Promise<void> {
    if (this.asking.has(user)) return;
    this.asking.add(user);
    let value: true | Error;
    try {
      const review = (await this.client.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: { resourceAttributes: { namespace, verb: 'list', resource: 'secrets' }, user },
        },
      })) as ReviewStatus;
      value = review.status?.allowed
        ? true
        : new Error(`${serviceAccount}/${namespace} is not authorized to read secrets: ${review.status?.reason ?? ''}`);
    } catch (e) {
      value = e instanceof Error ? e : new Error(String(e));
    } finally {
      this.asking.delete(user);
    }
    this.answers.set(user, { value, expires: this.now() + (value === true ? 5 * CACHE_TTL_MS : CACHE_TTL_MS) });
    log.debug(`cached authorization for user ${user}: ${value === true ? 'allowed' : value.message}`);
    const changed = before === undefined || (before === true) !== (value === true);
    if (changed) this.onAnswer(namespace);
  }
}
