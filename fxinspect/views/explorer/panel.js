// fxinspect explorer: the side panel (the box selected: a module's row and children, a
// stretch's ops, an op's figures), the breadcrumbs to it, and the module table, sortable by
// any figure. Loaded before explorer.js.
function fxinspectPanel(part, data, keys, text) {
  "use strict";
  const nodes = data.nodes;
  const modules = data.modules;
  const { index, modulePath, callOf, runOf } = keys;
  const { format, esc } = text;

  function crumbs(selected) { // the breadcrumbs above the graph, to the module (or run) selected
    const line = part("crumbs");
    if (!selected || !(selected.startsWith("m:") || selected.startsWith("r:"))) { line.innerHTML = ""; return; }
    const path = selected.startsWith("m:") ? modulePath(selected) : data.runs[selected.slice(2)].label;
    const parts = path.split(".");
    line.innerHTML = '<a data-crumb="">model</a>' +
      parts.map((p, i) => ` › <a data-crumb="${esc(parts.slice(0, i + 1).join("."))}">${esc(p)}</a>`).join("");
  }

  // (`current`: the boxes drawn)
  function panel(key, current) {
    const side = part("panel");
    if (!key) { side.innerHTML = "<p>Click a box: a module opens to its children, an op shows its figures.</p>"; return; }
    let html = "";
    if (key.startsWith("m:") || key.startsWith("r:")) {
      const path = key.startsWith("m:") ? modulePath(key) : data.runs[key.slice(2)].members[0];
      const m = modules[path];
      const call = key.startsWith("m:") ? callOf(key) : null;
      const title = key.startsWith("m:") ? path + (call !== null ? ` (call ${call + 1} of ${m.calls})` : "") : data.runs[key.slice(2)].label;
      html += `<h3>${esc(title || "model")}</h3><p>${esc(m.type)}${m.calls > 1 ? `, ${m.calls} calls` : ""}, ${format(m.params, "count")} params</p>`;
      if (key.startsWith("r:")) html += `<p>${data.runs[key.slice(2)].members.length} blocks folded; figures of the first:</p>`;
      const run = key.startsWith("m:") ? runOf.get(path) : undefined;
      if (run !== undefined) html += `<p>block ${data.runs[run].members.indexOf(path) + 1} of ${data.runs[run].members.length} of ${esc(data.runs[run].label)} (◀ ▶ on the box step through them)</p>`;
      html += "<table>" + Object.entries(m.figures).map(([f, v]) => `<tr><th>${esc(data.labels[f] || f)}</th><td>${esc(v)}</td></tr>`).join("") + "</table>";
      const kids = m.children.map((run) => (run.length > 1 ? data.runs[run[0]].label + ` (${run.length}×)` : run[0]));
      if (kids.length) html += "<h4>children</h4><ul>" + kids.map((k) => `<li>${esc(k)}</li>`).join("") + "</ul>";
    } else if (key.startsWith("s:")) {
      const members = current.boxes.find((b) => b.key === key);
      const ops = members ? members.nodes.map((i) => nodes[i]) : [];
      html += `<h3>${esc(key.slice(2))}</h3><p>${ops.length} ops of ${esc(ops.length ? ops[0].module || "the model" : "")} that run one after another; click the box to open them</p>`;
      html += "<ul>" + ops.map((n) => `<li>${esc(n.name)} (${esc(n.label)}) ${esc(n.shape)}</li>`).join("") + "</ul>";
    } else if (key.startsWith("n:") || key.startsWith("in:")) {
      const n = nodes[index.get(key.slice(key.indexOf(":") + 1))];
      html += `<h3>${esc(n.name)}</h3><p>${esc(n.label)} in ${esc(n.module || "the model")}</p><p>${esc(n.shape)} ${esc(n.dtype)}</p>`;
      html += "<table>" + Object.keys(data.colour_by).map((f) => `<tr><th>${esc(data.colour_by[f])}</th><td>${esc(format(n.values[f], data.units[f]))}</td></tr>`).join("") + "</table>";
    }
    side.innerHTML = html;
  }

  function table() {
    const rows = Object.entries(modules).filter(([p]) => p);
    const fields = Object.keys(rows.length ? rows[0][1].figures : {});
    const el = part("table");
    let sortBy = null, descending = true;
    function render() {
      const sorted = rows.slice();
      if (sortBy) sorted.sort((a, b) => byFigure(a[1].raw[sortBy], b[1].raw[sortBy], descending));
      el.innerHTML = "<thead><tr><th>module</th><th>type</th>" + fields.map((f) => sortHeader(f, sortBy, descending)).join("") +
        "</tr></thead><tbody>" + sorted.map(([p, m]) => `<tr data-row="${esc(p)}"><td>${esc(p)}</td><td>${esc(m.type)}</td>` +
        fields.map((f) => `<td>${esc(m.figures[f])}</td>`).join("") + "</tr>").join("") + "</tbody>";
    }
    el.addEventListener("click", (e) => {
      const th = e.target.closest("[data-sort]");
      if (!th) return;
      descending = sortBy === th.dataset.sort ? !descending : true;
      sortBy = th.dataset.sort;
      render();
    });
    render();
  }

  // the table's order by a figure: by its number either way, a module without it last
  function byFigure(a, b, descending) {
    const none = (v) => v === null || v === undefined;
    if (none(a) || none(b)) return none(a) - none(b);
    return descending ? b - a : a - b;
  }
  function sortHeader(f, sortBy, descending) { // a figure's column head, with the order it sorts by when it does
    const order = f === sortBy ? (descending ? "descending" : "ascending") : "none";
    const mark = f === sortBy ? (descending ? " ▼" : " ▲") : "";
    return `<th data-sort="${f}" class="sortable" aria-sort="${order}" title="sort by ${esc(data.labels[f] || f)}">${esc(data.labels[f] || f)}${mark}</th>`;
  }
  return { crumbs: crumbs, panel: panel, table: table };
}
