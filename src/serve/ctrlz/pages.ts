// ControlZ's HTML pages: one layout (header, topic sidebar) and a page per topic. Plain HTML with a little
// script that talks to the JSON API, served from these strings (nothing is read from disk at run time).
import type { BuildInfo } from '../../lib/buildinfo';
import { LEVEL_NAMES } from '../../lib/log';
import { escapeHtml as esc } from '../../lib/html';
import type { MetricFamilyJson, ScopeJson, Topic } from './topics';

const STYLE = `
body { margin: 0; font-family: -apple-system, "Segoe UI", Roboto, Arial, sans-serif; font-size: 14px; color: #222; }
header { background: #466bb0; color: #fff; padding: 10px 20px; display: flex; justify-content: space-between; }
header a { color: #fff; text-decoration: none; font-weight: bold; font-size: 18px; }
header .instance { opacity: .85; align-self: center; }
.wrap { display: flex; }
nav { width: 220px; background: #f3f5f9; min-height: calc(100vh - 44px); padding: 12px 0; }
nav a { display: block; padding: 6px 20px; color: #234; text-decoration: none; }
nav a.active, nav a:hover { background: #dfe6f3; }
main { flex: 1; padding: 16px 24px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #d8dde6; padding: 5px 10px; text-align: left; vertical-align: top; }
th { background: #eef1f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, Menlo, Consolas, monospace; }
button { padding: 5px 12px; }
.status { color: #666; font-size: 12px; }
`;

export interface LayoutInput {
  title: string;
  instance: string;
  topics: readonly Topic[];
  /** Prefix of the active topic, for the sidebar. */
  active?: string;
  body: string;
  script?: string;
}

export function layout(p: LayoutInput): string {
  const nav = p.topics.map((t) => `<a href="/${t.prefix}z/"${t.prefix === p.active ? ' class="active"' : ''}>${esc(t.title)}</a>`).join('\n');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ControlZ: ${esc(p.title)}</title>
<style>${STYLE}</style>
</head>
<body>
<header><a href="/">ControlZ</a><span class="instance">${esc(p.instance)}</span></header>
<div class="wrap">
<nav>
${nav}
</nav>
<main>
<h1>${esc(p.title)}</h1>
${p.body}
<p class="status" id="last-refresh"></p>
</main>
</div>
${p.script ? `<script>\n"use strict";\n${REFRESH_JS}\n${p.script}\n</script>` : ''}
</body>
</html>
`;
}

const REFRESH_JS = `function updateRefreshTime() {
  document.getElementById("last-refresh").textContent = "Last refresh: " + new Date().toLocaleTimeString();
}`;

function table(rows: ReadonlyArray<[string, string]>, id?: string): string {
  const body = rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td class="mono" data-key="${esc(k)}">${esc(v)}</td></tr>`).join('\n');
  return `<table${id ? ` id="${id}"` : ''}>\n${body}\n</table>`;
}

export function homeBody(info: Record<string, unknown>, topics: readonly Topic[]): string {
  const rows: Array<[string, string]> = [
    ['Process', String(info.ProcessName)],
    ['Hostname', String(info.Hostname)],
    ['IP address', String(info.IP)],
    ['Heap in use (bytes)', String(info.HeapSize)],
    ['Garbage collections', String(info.NumGC)],
  ];
  const links = topics.map((t) => `<li><a href="/${t.prefix}z/">${esc(t.title)}</a></li>`).join('\n');
  return `<p>ControlZ lets you inspect and control this process: its logging, memory, environment and metrics.</p>
${table(rows, 'home')}
<ul>\n${links}\n</ul>
<p><button id="exit" onclick="exitProcess()">Shut down the process</button></p>`;
}

export const HOME_JS = `function exitProcess() {
  if (!confirm("Shut the process down?")) return;
  fetch("/homej/exit", { method: "PUT" }).then(function () { document.getElementById("exit").disabled = true; });
}
function refreshHome() {
  fetch("/homej/").then(function (r) { return r.json(); }).then(function (h) {
    var cells = document.querySelectorAll("#home td");
    cells[3].textContent = String(h.HeapSize);
    cells[4].textContent = String(h.NumGC);
    updateRefreshTime();
  });
}
refreshHome();
window.setInterval(refreshHome, 2000);`;

function levelSelect(cls: string, current: string): string {
  const opts = LEVEL_NAMES.map((l) => `<option value="${l}"${l === current ? ' selected' : ''}>${l}</option>`).join('');
  return `<select class="${cls}">${opts}</select>`;
}

export function scopesBody(scopes: readonly ScopeJson[]): string {
  const rows = scopes
    .map(
      (s) => `<tr id="scope-${esc(s.name)}" data-scope="${esc(s.name)}">
<td class="mono">${esc(s.name)}</td><td>${esc(s.description)}</td>
<td>${levelSelect('output-level', s.output_level)}</td>
<td>${levelSelect('stack-trace-level', s.stack_trace_level)}</td>
<td><input type="checkbox" class="log-callers"${s.log_callers ? ' checked' : ''}></td>
</tr>`,
    )
    .join('\n');
  return `<p>Logging for this process is organized in scopes. Each scope has its own output level (which messages are
written), stack-trace level (which messages carry a stack trace) and caller flag. Changes apply at once.</p>
<table id="scopes">
<thead><tr><th>Scope</th><th>Description</th><th>Output Level</th><th>Stack Trace Level</th><th>Log Callers?</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`;
}

// Each control reads the scope, changes one field and PUTs it back, as Istio's page does.
export const SCOPES_JS = `function scopeOf(el) { return el.closest("tr").getAttribute("data-scope"); }
function updateScope(scope, change) {
  var url = "/scopej/" + encodeURIComponent(scope);
  return fetch(url).then(function (r) { return r.json(); }).then(function (info) {
    change(info);
    return fetch(url, { method: "PUT", headers: { "Content-Type": "application/json" }, body: JSON.stringify(info) });
  }).then(refreshScopes);
}
function refreshScopes() {
  return fetch("/scopej/").then(function (r) { return r.json(); }).then(function (list) {
    list.forEach(function (info) {
      var tr = document.getElementById("scope-" + info.name);
      if (!tr) return;
      var out = tr.querySelector(".output-level");
      var stack = tr.querySelector(".stack-trace-level");
      if (document.activeElement !== out) out.value = info.output_level;
      if (document.activeElement !== stack) stack.value = info.stack_trace_level;
      tr.querySelector(".log-callers").checked = info.log_callers;
    });
    updateRefreshTime();
  });
}
document.querySelectorAll("#scopes .output-level").forEach(function (el) {
  el.addEventListener("change", function () {
    var level = el.value;
    updateScope(scopeOf(el), function (info) { info.output_level = level; });
  });
});
document.querySelectorAll("#scopes .stack-trace-level").forEach(function (el) {
  el.addEventListener("change", function () {
    var level = el.value;
    updateScope(scopeOf(el), function (info) { info.stack_trace_level = level; });
  });
});
document.querySelectorAll("#scopes .log-callers").forEach(function (el) {
  el.addEventListener("change", function () {
    var on = el.checked;
    updateScope(scopeOf(el), function (info) { info.log_callers = on; });
  });
});
refreshScopes();
window.setInterval(refreshScopes, 1000);`;

function flatRows(prefix: string, obj: Record<string, unknown>): Array<[string, string]> {
  return Object.entries(obj).map(([k, v]) => [prefix + k, typeof v === 'object' ? JSON.stringify(v) : String(v)]);
}

export function memBody(mem: Record<string, unknown>): string {
  const usage = mem.memoryUsage as Record<string, unknown>;
  const heap = mem.heapStatistics as Record<string, unknown>;
  const spaces = mem.heapSpaces as Array<Record<string, unknown>>;
  const spaceRows = spaces
    .map(
      (s) =>
        `<tr><td class="mono">${esc(String(s.space_name))}</td><td class="num">${esc(String(s.space_size))}</td>` +
        `<td class="num">${esc(String(s.space_used_size))}</td><td class="num">${esc(String(s.space_available_size))}</td></tr>`,
    )
    .join('\n');
  return `<p>Memory of this Node.js process: resident set and V8 heap (bytes).</p>
<h2>Process</h2>
${table(flatRows('', usage), 'usage')}
<h2>V8 heap</h2>
${table(flatRows('', heap), 'heap')}
<h2>Heap spaces</h2>
<table><tr><th>Space</th><th>Size</th><th>Used</th><th>Available</th></tr>
${spaceRows}
</table>
<p><button onclick="forceCollection()">Force garbage collection</button></p>`;
}

export const MEM_JS = `function fill(id, obj) {
  document.querySelectorAll("#" + id + " td").forEach(function (td) {
    var v = obj[td.getAttribute("data-key")];
    if (v !== undefined) td.textContent = String(v);
  });
}
function refreshMem() {
  fetch("/memj/").then(function (r) { return r.json(); }).then(function (m) {
    fill("usage", m.memoryUsage);
    fill("heap", m.heapStatistics);
    updateRefreshTime();
  });
}
function forceCollection() { fetch("/memj/forcecollection", { method: "PUT" }).then(refreshMem); }
refreshMem();
window.setInterval(refreshMem, 1000);`;

export function envBody(vars: ReadonlyArray<{ name: string; value: string }>): string {
  const rows = vars.map((v) => `<tr><td class="mono">${esc(v.name)}</td><td class="mono">${esc(v.value)}</td></tr>`).join('\n');
  return `<p>The environment variables of this process.</p>
<table><tr><th>Name</th><th>Value</th></tr>
${rows}
</table>`;
}

export function procBody(info: Record<string, unknown>): string {
  return `<p>Information about this process.</p>\n${table(flatRows('', info), 'proc')}`;
}

export const PROC_JS = `function refreshProc() {
  fetch("/procj/").then(function (r) { return r.json(); }).then(function (p) {
    document.querySelectorAll("#proc td").forEach(function (td) {
      var v = p[td.getAttribute("data-key")];
      if (v !== undefined) td.textContent = typeof v === "object" ? JSON.stringify(v) : String(v);
    });
    updateRefreshTime();
  });
}
window.setInterval(refreshProc, 1000);`;

export function argsBody(args: readonly string[]): string {
  const items = args.map((a) => `<li class="mono">${esc(a)}</li>`).join('\n');
  return `<p>The command line of this process.</p>\n<ol>\n${items}\n</ol>`;
}

export function versionBody(b: BuildInfo): string {
  return `<p>Build information of this binary.</p>
${table([
  ['Version', b.version],
  ['Git revision', b.revision],
  ['Runtime', b.golang_version],
  ['Build status', b.status],
  ['Git tag', b.tag],
])}`;
}

export function metricsBody(families: readonly MetricFamilyJson[]): string {
  const rows = families
    .map((f) => {
      const values = f.metrics
        .map((m) => {
          const labels = m.labels ? JSON.stringify(m.labels) : '';
          const value = m.value ?? `count=${String(m.count)} sum=${String(m.sum)}`;
          return `${labels} ${String(value)}`.trim();
        })
        .join('\n');
      return `<tr><td class="mono">${esc(f.name)}</td><td>${esc(f.type)}</td><td>${esc(f.help)}</td><td class="mono"><pre>${esc(values)}</pre></td></tr>`;
    })
    .join('\n');
  return `<p>The metrics of this process, as exported on the monitoring port's <code>/metrics</code>.</p>
<table><tr><th>Name</th><th>Type</th><th>Help</th><th>Values</th></tr>
${rows}
</table>`;
}

export function signalsBody(watchers: number): string {
  return `<p>Send a signal to the process. SIGUSR1 is delivered to the components that subscribed to it
(${watchers} now); the operating-system SIGUSR1 is reserved by Node.js for its inspector, so use this page instead.</p>
<p><button id="sigusr1" onclick="sendSignal('SIGUSR1')">SIGUSR1</button> <span id="signal-result" class="status"></span></p>`;
}

export const SIGNALS_JS = `function sendSignal(name) {
  fetch("/signalj/" + name, { method: "PUT" }).then(function (r) {
    document.getElementById("signal-result").textContent = r.status === 202 ? name + " sent" : "failed: " + r.status;
  });
}`;

export function notFoundBody(path: string): string {
  return `<p>There is no page at <code>${esc(path)}</code>. Pick a topic on the left.</p>`;
}
