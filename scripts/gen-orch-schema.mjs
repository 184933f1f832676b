// Generates src/orch/schema.gen.ts: the JSON shape of the orchestrator (Kubernetes) objects mesh decodes and
// re-encodes (pods and the workload kinds holding pod templates), read from the Go struct definitions of
// k8s.io/api v0.33.3 (the version Istio 1.26 builds with) so that field order, omitempty and strategic-merge
// patch keys are exactly Go's.
//   node scripts/gen-orch-schema.mjs <path to a git clone of kubernetes/api>
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

const repo = process.argv[2];
if (!repo) {
  console.error('usage: node scripts/gen-orch-schema.mjs <kubernetes/api clone>');
  process.exit(2);
}
const TAG = 'v0.33.3';
const show = (file) => execFileSync('git', ['-C', repo, 'show', `${TAG}:${file}`], { encoding: 'utf8', maxBuffer: 64 << 20 });

// meta/v1 lives in k8s.io/apimachinery; the few types objects embed are written out here, as declared there.
// DeploymentConfig (apps.openshift.io/v1) is from github.com/openshift/api, which Istio's kube-inject decodes too.
const META = `
type TypeMeta struct {
	Kind string \`json:"kind,omitempty"\`
	APIVersion string \`json:"apiVersion,omitempty"\`
}
type ListMeta struct {
	SelfLink string \`json:"selfLink,omitempty"\`
	ResourceVersion string \`json:"resourceVersion,omitempty"\`
	Continue string \`json:"continue,omitempty"\`
	RemainingItemCount *int64 \`json:"remainingItemCount,omitempty"\`
}
type ObjectMeta struct {
	Name string \`json:"name,omitempty"\`
	GenerateName string \`json:"generateName,omitempty"\`
	Namespace string \`json:"namespace,omitempty"\`
	SelfLink string \`json:"selfLink,omitempty"\`
	UID types.UID \`json:"uid,omitempty"\`
	ResourceVersion string \`json:"resourceVersion,omitempty"\`
	Generation int64 \`json:"generation,omitempty"\`
	CreationTimestamp Time \`json:"creationTimestamp,omitempty"\`
	DeletionTimestamp *Time \`json:"deletionTimestamp,omitempty"\`
	DeletionGracePeriodSeconds *int64 \`json:"deletionGracePeriodSeconds,omitempty"\`
	Labels map[string]string \`json:"labels,omitempty"\`
	Annotations map[string]string \`json:"annotations,omitempty"\`
	OwnerReferences []OwnerReference \`json:"ownerReferences,omitempty" patchStrategy:"merge" patchMergeKey:"uid"\`
	Finalizers []string \`json:"finalizers,omitempty" patchStrategy:"merge"\`
	ManagedFields []ManagedFieldsEntry \`json:"managedFields,omitempty"\`
}
type OwnerReference struct {
	APIVersion string \`json:"apiVersion"\`
	Kind string \`json:"kind"\`
	Name string \`json:"name"\`
	UID types.UID \`json:"uid"\`
	Controller *bool \`json:"controller,omitempty"\`
	BlockOwnerDeletion *bool \`json:"blockOwnerDeletion,omitempty"\`
}
type LabelSelector struct {
	MatchLabels map[string]string \`json:"matchLabels,omitempty"\`
	MatchExpressions []LabelSelectorRequirement \`json:"matchExpressions,omitempty"\`
}
type LabelSelectorRequirement struct {
	Key string \`json:"key" patchStrategy:"merge" patchMergeKey:"key"\`
	Operator LabelSelectorOperator \`json:"operator"\`
	Values []string \`json:"values,omitempty"\`
}
type LabelSelectorOperator string
`;

const OPENSHIFT = `
type DeploymentConfig struct {
	metav1.TypeMeta \`json:",inline"\`
	metav1.ObjectMeta \`json:"metadata,omitempty"\`
	Spec DeploymentConfigSpec \`json:"spec"\`
	Status DeploymentConfigStatus \`json:"status,omitempty"\`
}
type DeploymentConfigSpec struct {
	Strategy DeploymentStrategy \`json:"strategy"\`
	MinReadySeconds int32 \`json:"minReadySeconds,omitempty"\`
	Triggers DeploymentTriggerPolicies \`json:"triggers"\`
	Replicas int32 \`json:"replicas"\`
	RevisionHistoryLimit *int32 \`json:"revisionHistoryLimit,omitempty"\`
	Test bool \`json:"test"\`
	Paused bool \`json:"paused,omitempty"\`
	Selector map[string]string \`json:"selector,omitempty"\`
	Template *corev1.PodTemplateSpec \`json:"template,omitempty"\`
}
type DeploymentStrategy struct {
	Type DeploymentStrategyType \`json:"type,omitempty"\`
	CustomParams *CustomDeploymentStrategyParams \`json:"customParams,omitempty"\`
	RecreateParams *RecreateDeploymentStrategyParams \`json:"recreateParams,omitempty"\`
	RollingParams *RollingDeploymentStrategyParams \`json:"rollingParams,omitempty"\`
	Resources corev1.ResourceRequirements \`json:"resources,omitempty"\`
	Labels map[string]string \`json:"labels,omitempty"\`
	Annotations map[string]string \`json:"annotations,omitempty"\`
	ActiveDeadlineSeconds *int64 \`json:"activeDeadlineSeconds,omitempty"\`
}
type DeploymentStrategyType string
type CustomDeploymentStrategyParams struct {
	Image string \`json:"image,omitempty"\`
	Environment []corev1.EnvVar \`json:"environment,omitempty"\`
	Command []string \`json:"command,omitempty"\`
}
type RecreateDeploymentStrategyParams struct {
	TimeoutSeconds *int64 \`json:"timeoutSeconds,omitempty"\`
	Pre *LifecycleHook \`json:"pre,omitempty"\`
	Mid *LifecycleHook \`json:"mid,omitempty"\`
	Post *LifecycleHook \`json:"post,omitempty"\`
}
type RollingDeploymentStrategyParams struct {
	UpdatePeriodSeconds *int64 \`json:"updatePeriodSeconds,omitempty"\`
	IntervalSeconds *int64 \`json:"intervalSeconds,omitempty"\`
	TimeoutSeconds *int64 \`json:"timeoutSeconds,omitempty"\`
	MaxUnavailable *intstr.IntOrString \`json:"maxUnavailable,omitempty"\`
	MaxSurge *intstr.IntOrString \`json:"maxSurge,omitempty"\`
	Pre *LifecycleHook \`json:"pre,omitempty"\`
	Post *LifecycleHook \`json:"post,omitempty"\`
}
type LifecycleHook struct {
	FailurePolicy LifecycleHookFailurePolicy \`json:"failurePolicy"\`
	ExecNewPod *ExecNewPodHook \`json:"execNewPod,omitempty"\`
	TagImages []TagImageHook \`json:"tagImages,omitempty"\`
}
type LifecycleHookFailurePolicy string
type ExecNewPodHook struct {
	Command []string \`json:"command"\`
	Env []corev1.EnvVar \`json:"env,omitempty"\`
	ContainerName string \`json:"containerName"\`
	Volumes []string \`json:"volumes,omitempty"\`
}
type TagImageHook struct {
	ContainerName string \`json:"containerName"\`
	To corev1.ObjectReference \`json:"to"\`
}
type DeploymentTriggerPolicies []DeploymentTriggerPolicy
type DeploymentTriggerPolicy struct {
	Type DeploymentTriggerType \`json:"type,omitempty"\`
	ImageChangeParams *DeploymentTriggerImageChangeParams \`json:"imageChangeParams,omitempty"\`
}
type DeploymentTriggerType string
type DeploymentTriggerImageChangeParams struct {
	Automatic bool \`json:"automatic,omitempty"\`
	ContainerNames []string \`json:"containerNames,omitempty"\`
	From corev1.ObjectReference \`json:"from"\`
	LastTriggeredImage string \`json:"lastTriggeredImage,omitempty"\`
}
type DeploymentConfigStatus struct {
	LatestVersion int64 \`json:"latestVersion"\`
	ObservedGeneration int64 \`json:"observedGeneration"\`
	Replicas int32 \`json:"replicas"\`
	UpdatedReplicas int32 \`json:"updatedReplicas"\`
	AvailableReplicas int32 \`json:"availableReplicas"\`
	UnavailableReplicas int32 \`json:"unavailableReplicas"\`
	Details *DeploymentDetails \`json:"details,omitempty"\`
	Conditions []DeploymentCondition \`json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"\`
	ReadyReplicas int32 \`json:"readyReplicas,omitempty"\`
}
type DeploymentDetails struct {
	Message string \`json:"message,omitempty"\`
	Causes []DeploymentCause \`json:"causes"\`
}
type DeploymentCause struct {
	Type DeploymentTriggerType \`json:"type"\`
	ImageTrigger *DeploymentCauseImageTrigger \`json:"imageTrigger,omitempty"\`
}
type DeploymentCauseImageTrigger struct {
	From corev1.ObjectReference \`json:"from"\`
}
type DeploymentCondition struct {
	Type DeploymentConditionType \`json:"type"\`
	Status corev1.ConditionStatus \`json:"status"\`
	LastUpdateTime metav1.Time \`json:"lastUpdateTime,omitempty"\`
	LastTransitionTime metav1.Time \`json:"lastTransitionTime,omitempty"\`
	Reason string \`json:"reason,omitempty"\`
	Message string \`json:"message,omitempty"\`
}
type DeploymentConditionType string
`;

const SOURCES = [
  { pkg: 'meta', text: META },
  { pkg: 'core', text: show('core/v1/types.go') },
  { pkg: 'apps', text: show('apps/v1/types.go') },
  { pkg: 'batch', text: show('batch/v1/types.go') },
  { pkg: 'oapps', text: OPENSHIFT },
];
const ALIASES = { metav1: 'meta', v1: 'core', corev1: 'core', appsv1: 'apps', batchv1: 'batch' };

const structs = new Map(); // qualified name -> raw field list
const named = new Map(); // qualified name -> underlying type text
for (const { pkg, text } of SOURCES) {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^type (\w+) struct \{\s*$/.exec(lines[i]);
    if (m) {
      const fields = [];
      for (i++; i < lines.length && lines[i] !== '}'; i++) {
        const line = lines[i].replace(/\/\/.*$/, '');
        const f = /^\t(?:(\w+)\s+)?([*[\]\w.]+)\s+`([^`]*)`/.exec(line);
        if (f) fields.push({ name: f[1], type: f[2], tag: f[3] });
      }
      structs.set(`${pkg}.${m[1]}`, fields);
      continue;
    }
    const t = /^type (\w+) ([^\s{]+)\s*$/.exec(lines[i]);
    if (t) named.set(`${pkg}.${t[1]}`, { pkg, type: t[2] });
  }
}

const SCALARS = {
  string: 'string',
  bool: 'bool',
  int: 'int',
  int32: 'int',
  int64: 'int',
  uint: 'int',
  uint32: 'int',
  uint64: 'int',
  float32: 'float',
  float64: 'float',
  byte: 'int',
  'resource.Quantity': 'quantity',
  'intstr.IntOrString': 'intstr',
  'metav1.Time': 'time',
  'metav1.MicroTime': 'time',
  'meta.Time': 'time',
  Time: 'time',
  'metav1.Duration': 'string',
  'types.UID': 'string',
  'runtime.RawExtension': 'raw',
  'metav1.FieldsV1': 'raw',
  ManagedFieldsEntry: 'raw',
};

function resolve(type, pkg) {
  if (type.startsWith('*')) return '*' + resolve(type.slice(1), pkg);
  if (type === '[]byte') return 'bytes';
  if (type.startsWith('[]')) return '[]' + resolve(type.slice(2), pkg);
  const map = /^map\[[^\]]+\](.+)$/.exec(type);
  if (map) return 'map:' + resolve(map[1], pkg);
  if (SCALARS[type]) return SCALARS[type];
  let q = type.includes('.') ? type.replace(/^(\w+)\./, (_, a) => `${ALIASES[a] ?? a}.`) : `${pkg}.${type}`;
  if (SCALARS[q]) return SCALARS[q];
  if (structs.has(q)) return q;
  if (named.has(q)) {
    const n = named.get(q);
    return resolve(n.type, n.pkg);
  }
  if (!type.includes('.') && structs.has(`meta.${type}`)) return `meta.${type}`;
  return 'raw';
}

const out = {};
for (const [name, fields] of structs) {
  const pkg = name.split('.')[0];
  out[name] = fields.map((f) => {
    const json = /json:"([^"]*)"/.exec(f.tag)?.[1] ?? '';
    const [jname, ...opts] = json.split(',');
    const strategy = /patchStrategy:"([^"]*)"/.exec(f.tag)?.[1];
    const key = /patchMergeKey:"([^"]*)"/.exec(f.tag)?.[1];
    const row = [jname === '' && opts.includes('inline') ? '' : jname || f.name || f.type.replace(/^.*\./, ''), resolve(f.type, pkg)];
    const flags = (opts.includes('omitempty') ? 'o' : '') + (opts.includes('inline') ? 'i' : '');
    // The Go field name, when it is not the JSON name capitalized (HTTPGet, UID, APIVersion, …).
    const goName = f.name ?? f.type.replace(/^[*]?(\w+\.)?/, '');
    const capitalized = row[0].charAt(0).toUpperCase() + row[0].slice(1);
    const extra = goName !== capitalized ? goName : '';
    if (flags || strategy || key || extra) row.push(flags);
    if (strategy || key || extra) row.push(strategy ?? '', key ?? '');
    if (extra) row.push(extra);
    return row;
  });
}

const header = `// Generated by scripts/gen-orch-schema.mjs from k8s.io/api ${TAG} (core/v1, apps/v1, batch/v1), meta/v1 of
// k8s.io/apimachinery and apps.openshift.io/v1 DeploymentConfig. Do not edit.
// Each struct: [json name ('' = inline), type, flags ('o' omitempty, 'i' inline)?, patchStrategy?, patchMergeKey?,\n// Go field name when it is not the JSON name capitalized?].
// Types: string int float bool quantity intstr time bytes raw, '*T' pointer, '[]T' slice, 'map:T' map, or a struct name.
`;
const file = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'src', 'orch', 'schema.gen.ts');
writeFileSync(
  file,
  header +
    `export const STRUCTS: Readonly<Record<string, ReadonlyArray<readonly string[]>>> = ${JSON.stringify(out)
      .replace(/\],\[/g, '],\n  [')
      .replace(/":\[\[/g, '": [\n  [')
      .replace(/\]\],"/g, ']],\n"')};\n`,
);
console.log(`wrote ${file}: ${structs.size} structs`);
