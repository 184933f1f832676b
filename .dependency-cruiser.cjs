// The layering of src/, checked by dependency-cruiser in `npm test` (test/layout/dependencies.test.ts):
// `npx depcruise src --config .dependency-cruiser.cjs --output-type err` prints every violation.
//
// One direction of dependency: the composition root (src/main/) wires behaviours; behaviours import what
// sits below them; src/lib/ and the generated protos are the floor. The control-plane spine runs
// config/ → discovery/ → xds/ → meshd/ (each may import the ones before it, never after), and the data
// plane (proxy/) knows xDS through src/lib/xds, never our config model or the control plane.

/** The control-plane spine, lowest first: a folder may import the ones before it, never those after. */
const SPINE = ['config', 'discovery', 'xds', 'meshd'];

const spineRules = SPINE.slice(0, -1).map((low, i) => ({
  name: `spine-${low}-not-above`,
  comment: `src/${low}/ sits below ${SPINE.slice(i + 1).join(', ')} (config → discovery → xds → meshd)`,
  severity: 'error',
  from: { path: `^src/${low}/` },
  to: { path: `^src/(${SPINE.slice(i + 1).join('|')})/` },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-folder-cycles',
      comment: 'folders (at every depth) import each other in one direction only',
      severity: 'error',
      scope: 'folder',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-file-cycles',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...spineRules,
    {
      name: 'proxy-knows-xds-not-the-control-plane',
      comment: 'the engine consumes what Envoy consumes: xDS (src/lib/xds, src/gen), nothing of our config model or control plane',
      severity: 'error',
      from: { path: '^src/proxy/' },
      to: { path: '^src/(config|discovery|xds|meshd|security|ca|agent|analysis|meshctl|inject|multicluster|leader)/' },
    },
    {
      name: 'lib-is-the-floor',
      comment: 'src/lib/ imports nothing of ours but itself and the generated protos',
      severity: 'error',
      from: { path: '^src/lib/' },
      to: { path: '^src/', pathNot: '^src/(lib|gen|types)/' },
    },
    {
      name: 'cli-is-the-table-engine',
      comment: 'src/cli/ (argv, help, completion, the RunContext type) imports only the tables and src/lib/; handlers reach it through src/main/',
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^src/', pathNot: '^src/(cli|lib|gen|types)/' },
    },
    {
      name: 'behaviours-import-only-the-run-context-from-cli',
      comment: 'a behaviour takes its RunContext/Handler/CommandError from cli/context.ts; parsing and routing belong to src/main/ and src/cli/',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(cli|main)/|^src/main[.]ts$' },
      to: { path: '^src/cli/', pathNot: '^src/cli/context[.]ts$' },
    },
    {
      name: 'only-the-entry-point-imports-the-root',
      comment: 'src/main/ wires behaviours together; nothing but src/main.ts imports it',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/main/|^src/main[.]ts$' },
      to: { path: '^src/main/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/gen/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.mjs', '.js', '.json'] },
  },
};
