// install --verify's status rules, on the cases of Istio's verifier tests (operator/pkg/verifier/verify_test.go,
// Istio 1.23) and the messages of its k8s_util.go.
import t from 'tap';
import { daemonSetProblem, deploymentProblem, jobProblem } from '../../src/manifest/verify';

t.test('Deployments: Istio verify_test.go cases', async (t) => {
  const available = { metadata: { name: 'd' }, status: { conditions: [{ type: 'Available' }] } };
  const scaleUpRolling = {
    metadata: { name: 'd' },
    spec: { replicas: 3 },
    status: { conditions: [{ type: 'Progressing' }, { type: 'Available' }], updatedReplicas: 2 },
  };
  const deletingOldRolling = {
    metadata: { name: 'd' },
    spec: { replicas: 2 },
    status: { conditions: [{ type: 'Progressing' }, { type: 'Available' }], updatedReplicas: 2, availableReplicas: 2, replicas: 3 },
  };
  const failed = {
    metadata: { name: 'd' },
    spec: { replicas: 2 },
    status: { conditions: [{ type: 'ReplicaFailure' }], updatedReplicas: 2, availableReplicas: 0, replicas: 3 },
  };
  const deadlineExceeded = { metadata: { name: 'd' }, status: { conditions: [{ type: 'Progressing', reason: 'ProgressDeadlineExceeded' }] } };
  t.equal(deploymentProblem(available), undefined);
  t.equal(deploymentProblem(scaleUpRolling), 'waiting for deployment "d" rollout to finish: 2 out of 3 new replicas have been updated');
  t.equal(deploymentProblem(deletingOldRolling), 'waiting for deployment "d" rollout to finish: 1 old replicas are pending termination');
  t.equal(deploymentProblem(failed), 'waiting for deployment "d" rollout to finish: 1 old replicas are pending termination');
  t.equal(deploymentProblem(deadlineExceeded), 'deployment "d" exceeded its progress deadline');
  t.equal(
    deploymentProblem({ metadata: { name: 'd' }, spec: { replicas: 1 }, status: { updatedReplicas: 1, replicas: 1, availableReplicas: 0 } }),
    'waiting for deployment "d" rollout to finish: 0 of 1 updated replicas are available',
  );
});

t.test('DaemonSets and Jobs', async (t) => {
  const ds = (status: object, type = 'RollingUpdate') => ({ metadata: { name: 'cni', namespace: 'ns' }, spec: { updateStrategy: { type } }, status });
  t.equal(daemonSetProblem(ds({ desiredNumberScheduled: 2, currentNumberScheduled: 2, numberReady: 2 })), undefined);
  t.equal(
    daemonSetProblem(ds({ desiredNumberScheduled: 2, currentNumberScheduled: 1 })),
    'waiting for daemonset ns/cni rollout to finish: 1 of 2 desired pods are scheduled',
  );
  t.equal(
    daemonSetProblem(ds({ desiredNumberScheduled: 0, currentNumberScheduled: 0 })),
    'DaemonSet ns/cni is not ready. Initializing, no pods are running',
  );
  t.equal(
    daemonSetProblem(ds({ desiredNumberScheduled: 3, currentNumberScheduled: 3, numberReady: 1 })),
    'DaemonSet ns/cni is not ready. 1 out of 3 expected pods are ready',
  );
  t.equal(
    daemonSetProblem(ds({ desiredNumberScheduled: 3, currentNumberScheduled: 3, updatedNumberScheduled: 2 }, 'OnDelete')),
    'DaemonSet is not ready: ns/cni. 2 out of 3 expected pods have been scheduled',
  );
  t.equal(jobProblem({ metadata: { name: 'j', namespace: 'ns' }, status: { conditions: [{ type: 'Complete', status: 'True' }] } }), undefined);
  t.equal(
    jobProblem({ metadata: { name: 'j', namespace: 'ns' }, status: { conditions: [{ type: 'Failed', status: 'True' }] } }),
    'the required Job ns/j failed',
  );
});
