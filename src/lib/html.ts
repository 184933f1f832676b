// HTML text escaping for the daemon's and ControlZ's server-rendered pages (what Go's html/template does
// to text in these pages: the five characters that can open markup or close an attribute).
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}
