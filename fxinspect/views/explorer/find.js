// fxinspect explorer: find modules and ops. A query lists every hit (name, type, path) in
// a list with previous/next; Enter steps to the next hit (Shift+Enter: the previous) and
// `reveal` opens the way to it. A query matches a module's path or type and an op's name
// or kind, without regard to case ("Linear", "conv2d", "c_fc"); "aten.mm", "aten.mm.default"
// or "torch.mm" is the op kind mm exactly; "/layers\.\d+\.mlp/" a regular expression. Loaded before
// explorer.js.
function fxinspectFind(input, list, data, reveal) {
  "use strict";
  const SHOWN = 500; // the most hits listed at once (every hit is still counted and stepped to)
  let hits = [], at = -1, asked = null;

  // the test a query makes of a text, or null when it matches nothing (a bad expression)
  function matcher(query) {
    const q = query.trim();
    const expression = /^\/(.+)\/([a-z]*)$/.exec(q);
    if (expression) {
      try {
        const re = new RegExp(expression[1], expression[2].replace(/[gy]/g, "") || "i");
        return { any: (text) => re.test(text), kind: null };
      } catch (err) {
        return null;
      }
    }
    const exact = /^(aten|torch|F)\.(\w+?)(\.\w+)?$/.exec(q); // an op kind by its qualified name (an overload aside)
    if (exact) return { any: () => false, kind: exact[2].toLowerCase() };
    const lower = q.toLowerCase();
    return { any: (text) => text.toLowerCase().includes(lower), kind: null };
  }

  // every module (the model itself aside) and op that `query` matches: modules first,
  // each in the report's order
  function search(query) {
    const m = matcher(query);
    if (!m || !query.trim()) return [];
    const found = [];
    for (const [path, module] of Object.entries(data.modules)) {
      if (path && (m.any(path) || m.any(module.type))) found.push({ path: path, type: module.type, name: path });
    }
    for (const n of data.nodes) {
      const kind = n.kind === "op" ? n.label : "input";
      const hit = m.kind !== null ? n.kind === "op" && n.label.toLowerCase() === m.kind : m.any(n.name) || (n.kind === "op" && m.any(n.label));
      if (hit) found.push({ node: n.name, type: kind, name: n.name, path: n.module });
    }
    return found;
  }

  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function render() {
    input.classList.toggle("missing", asked !== null && !hits.length);
    if (asked === null) { list.hidden = true; list.innerHTML = ""; return; }
    const rows = hits.slice(0, SHOWN).map((h, i) =>
      `<tr data-hit="${i}"${i === at ? ' class="current"' : ""}><td>${esc(h.name)}</td><td>${esc(h.type)}</td><td>${esc(h.node ? h.path || "(model)" : "")}</td></tr>`);
    const more = hits.length > SHOWN ? `<p>the first ${SHOWN} listed; ◀ ▶ and Enter step through all ${hits.length}</p>` : "";
    list.innerHTML = `<div class="found"><button type="button" data-go="-1">◀</button> <span data-part="count">${hits.length ? at + 1 : 0} of ${hits.length}</span> ` +
      `<button type="button" data-go="1">▶</button> <button type="button" data-go="0" title="close the list">✕</button></div>` +
      `<table><tbody>${rows.join("")}</tbody></table>${more}`;
    list.hidden = false;
    const current = list.querySelector("tr.current");
    if (current) current.scrollIntoView({ block: "nearest" });
  }
  function go(i) {
    if (!hits.length) return;
    at = (i + hits.length) % hits.length;
    reveal(hits[at]);
    render();
  }
  function run(query) { asked = query; hits = search(query); at = -1; }
  // Enter: a new query lists its hits and shows the first, the same query steps on
  input.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    if (asked !== input.value) { run(input.value); go(0); render(); }
    else go(at + (e.shiftKey ? -1 : 1));
  });
  list.addEventListener("click", (e) => {
    const button = e.target.closest("[data-go]"), row = e.target.closest("[data-hit]");
    if (button && button.dataset.go === "0") { asked = null; hits = []; at = -1; render(); }
    else if (button) go(at + Number(button.dataset.go));
    else if (row) go(Number(row.dataset.hit));
  });
  return { search: search, hits: () => hits, at: () => at };
}
