// fxinspect explorer: what a box says (its name, type, the shapes its edges carry in and
// out, its figure; a run's member its place in the run), sized to fit; and what an edge's
// label says. Loaded before explorer.js.
function fxinspectDescribe(data, keys, changes, text) {
  "use strict";
  const nodes = data.nodes;
  const modules = data.modules;
  const { modulePath, callOf, partOf, runOf } = keys;
  const { format, esc } = text;
  const measure = document.createElement("canvas").getContext("2d");

  // the label of an edge: the shape and dtype of each node's output it carries (two at most), as
  // report.plot writes it (fxinspect.views.edge_labels.edge_label; a browser test holds them equal)
  function carries(carried) {
    const texts = [...new Set(carried.map((j) => nodes[j].shape + (nodes[j].dtype ? " " + nodes[j].dtype : "")))];
    return texts.slice(0, 2).join("; ") + (texts.length > 2 ? "; …" : "");
  }
  // what box `box` shows of its shapes: those entering it (two at most) and the one leaving, one
  // when they are the same (as report.plot writes them)
  function shapes(box) {
    const last = box.leaving !== null ? nodes[box.leaving] : box.nodes.length ? nodes[box.nodes[box.nodes.length - 1]] : null;
    const out = last ? last.shape : "";
    const came = [...new Set(box.entering.flatMap((j) => nodes[j].shape.split(", ")))];
    const into = came.slice(0, 2).join(", ") + (came.length > 2 ? ", …" : "");
    return into && out && into !== out ? `${into} → ${out}` : out || into;
  }

  // ---------------------------------------------------------------- boxes' text and figures
  // (`colourBy`: the figure boxes are coloured by; `split`: the calls drawn in parts, by their first part's key)
  function describe(box, colourBy, split) {
    const k = box.key;
    const sum = (field) => {
      let total = 0;
      for (const i of box.nodes) { const v = nodes[i].values[field]; if (v === null || v === undefined) return null; total += v; }
      return total;
    };
    const last = box.nodes.length ? nodes[box.nodes[box.nodes.length - 1]] : null;
    const info = { key: k, value: colourBy ? sum(colourBy) : null, sum: sum, lines: [], attr: "" };
    if (k === "out") {
      info.lines = [["output", "b"], [data.output.shape, ""]];
      info.kind = "io";
    } else if (k.startsWith("in:")) {
      info.lines = [[last.name, "b"], [last.shape, ""]];
      info.kind = "io";
      info.attr = ` data-node="${esc(last.name)}"`;
    } else if (k.startsWith("n:")) {
      info.lines = [[last.name, "b"], [last.label, ""], [shapes(box), ""]];
      info.kind = "op";
      info.attr = ` data-node="${esc(last.name)}"`;
    } else if (k.startsWith("m:")) {
      const path = modulePath(k), call = callOf(k);
      const m = modules[path];
      const which = (call !== null ? ` (call ${call + 1} of ${m.calls})` : m.calls > 1 ? ` (${m.calls} calls)` : "") + (partOf(k) ? ` (part ${partOf(k)})` : split.has(k) ? " (part 1)" : "");
      const run = runOf.get(path), members = run !== undefined ? data.runs[run].members : null;
      const times = members ? ` × ${members.length}` : ""; // the one member an open run shows
      info.lines = [[path + which + times, "b"], [m.type, ""], [shapes(box), ""]];
      if (members) info.step = { index: members.indexOf(path), count: members.length };
      info.kind = "module";
      info.attr = ` data-path="${esc(path)}"` + (call !== null ? ` data-call="${call}"` : "") + (partOf(k) ? ` data-piece="${partOf(k)}"` : "");
    } else if (k.startsWith("s:")) {
      // a stretch of a module's own ops: named after its costliest op, as report.plot names it
      const cost = new Map();
      for (const i of box.nodes) cost.set(nodes[i].label, (cost.get(nodes[i].label) || 0) + (nodes[i].values.flops || 0));
      const kinds = [...cost.keys()];
      const top = kinds.reduce((a, b) => (cost.get(b) > cost.get(a) ? b : a));
      const owner = nodes[box.nodes[0]].module;
      let title = top + (kinds.length > 1 ? ` +${kinds.length - 1} more` : "");
      if (box.nodes.some((i) => nodes[i].values.communication)) {  // the module's collectives, named for it
        const computing = kinds.filter((label) => cost.get(label) > 0);
        title = `${owner || "(root)"} collectives` + (computing.length ? `, ${top}` + (computing.length > 1 ? ` +${computing.length - 1} more` : "") : "");
      }
      info.lines = [[title, "b"], [`${owner ? modules[owner].type : "model"} ops (${box.nodes.length})`, ""], [shapes(box), ""]];
      info.kind = "ops";
      info.attr = ` data-ops="${esc(k.slice(2))}"`;
    } else {
      const run = data.runs[k.slice(2)];
      const m = modules[run.members[0]];
      info.lines = [[`${run.label} (${run.members.length}×)`, "b"], [m.type, ""], [shapes(box), ""]];
      info.kind = "module";
      info.attr = ` data-path="${esc(run.label)}"`;
    }
    if (changes && info.kind === "module") {  // a diff page: how the module differs in the other report
      const paths = k.startsWith("m:") ? [modulePath(k)] : data.runs[k.slice(2)].members;
      const found = paths.map((p) => changes[p]).filter((c) => c && (c.changed || c.only));
      if (found.length) {
        info.change = found.some((c) => c.only) ? "only" : "changed";
        info.lines.push([found[0].text, ""]);
      }
    }
    if (colourBy && info.value !== null && box.nodes.length) {
      info.lines.push([format(info.value, data.units[colourBy]) + " " + data.colour_by[colourBy], ""]);
    }
    info.lines = info.lines.filter((l) => l[0]);
    let w = 0;
    for (const [text, b] of info.lines) {
      measure.font = (b ? "bold " : "") + (b ? "12px" : "11px") + " sans-serif";
      w = Math.max(w, measure.measureText(text).width);
    }
    info.w = Math.ceil(w) + (info.step ? 52 : 20); // (room for the arrows that step through a run)
    info.h = info.lines.length * 15 + 10;
    return info;
  }
  return { describe: describe, carries: carries };
}
