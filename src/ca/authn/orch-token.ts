// An orchestrator service-account token, checked by the API server itself (Istio's KubeJWTAuthenticator and
// tokenreview.ValidateK8sJwt): a TokenReview with TOKEN_AUDIENCES must come back authenticated, for a user in
// `system:serviceaccounts` named `system:serviceaccount:<ns>:<sa>`. The review also says which pod the token
// was bound to, which node impersonation (CA_TRUSTED_NODE_ACCOUNTS) needs.
import type { OrchClient } from '../../config/orch';
import { AuthnError, type Authenticator, type AuthRequest, bearerToken, type Caller, type OrchCallerInfo } from './types';
import { spiffeUri } from '../../lib/spiffe';

export type OrchApi = Pick<OrchClient, 'request'>;

/** The gRPC metadata key a caller names its cluster with. */
export const CLUSTER_ID_META = 'clusterid';
const POD_NAME_KEY = 'authentication.kubernetes.io/pod-name';
const POD_UID_KEY = 'authentication.kubernetes.io/pod-uid';

interface TokenReviewStatus {
  authenticated?: boolean;
  error?: string;
  user?: { username?: string; groups?: string[]; extra?: Record<string, string[]> };
}

/** Istio's getTokenReviewResult: the caller's pod facts, or why the review does not identify a service account. */
export function tokenReviewResult(status: TokenReviewStatus | undefined): OrchCallerInfo {
  const s = status ?? {};
  if (s.error) throw new AuthnError(`the service account authentication returns an error: ${s.error}`);
  if (!s.authenticated) throw new AuthnError('the token is not authenticated');
  if (!(s.user?.groups ?? []).includes('system:serviceaccounts')) throw new AuthnError('the token is not a service account', true);
  const parts = (s.user?.username ?? '').split(':');
  if (parts.length !== 4) throw new AuthnError('invalid username field in the token review result', true);
  const extra = (k: string) => s.user?.extra?.[k]?.[0] ?? '';
  return { podName: extra(POD_NAME_KEY), podNamespace: parts[2]!, podUid: extra(POD_UID_KEY), podServiceAccount: parts[3]! };
}

export interface OrchTokenAuthenticatorOptions {
  api: OrchApi;
  /** TOKEN_AUDIENCES. */
  audiences: readonly string[];
  clusterId: string;
  /** --clusterAliases: alias → cluster. */
  clusterAliases?: Readonly<Record<string, string>>;
  trustDomain: () => string;
}

export class OrchTokenAuthenticator implements Authenticator {
  readonly type = 'KubeJWTAuthenticator';

  constructor(private readonly o: OrchTokenAuthenticatorOptions) {}

  async authenticate(req: AuthRequest): Promise<Caller> {
    let token: string;
    try {
      token = bearerToken(req);
    } catch (e) {
      throw new AuthnError(`target JWT extraction error: ${(e as Error).message}`);
    }
    const claimed = req.header(CLUSTER_ID_META);
    const clusterId = claimed.length === 1 ? claimed[0]! : '';
    if (clusterId !== '' && clusterId !== this.o.clusterId && this.o.clusterAliases?.[clusterId] !== this.o.clusterId) {
      throw new AuthnError(
        `client claims to be in cluster "${clusterId}", but we only know about local cluster "${this.o.clusterId}" and remote clusters []`,
      );
    }
    let review: { status?: TokenReviewStatus };
    try {
      review = (await this.o.api.request('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, audiences: this.o.audiences },
        },
      })) as typeof review;
    } catch (e) {
      throw new AuthnError(`failed to validate the JWT from cluster "${clusterId}": ${(e as Error).message}`);
    }
    let info: OrchCallerInfo;
    try {
      info = tokenReviewResult(review.status);
    } catch (e) {
      if (e instanceof AuthnError) throw new AuthnError(`failed to validate the JWT from cluster "${clusterId}": ${e.message}`, e.idExtraction);
      throw e;
    }
    if (!info.podServiceAccount) throw new AuthnError('failed to parse the JWT; service account required', true);
    if (!info.podNamespace) throw new AuthnError('failed to parse the JWT; namespace required', true);
    return { source: 'id-token', identities: [spiffeUri(this.o.trustDomain(), info.podNamespace, info.podServiceAccount)], orch: info };
  }
}
