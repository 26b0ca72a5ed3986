// fxinspect explorer: the module graph of one report, opened level by level.
// Reads the report's data from the page (#fxinspect-data); lays out only the boxes that
// are open; every module box carries data-path, every op box data-node (the testing
// contract in docs/explorer.md).
(function () {
  "use strict";
  const tooltip = document.getElementById("tooltip");
  const svgNS = "http://www.w3.org/2000/svg";
  const measure = document.createElement("canvas").getContext("2d");

  // one explorer inside `root` (its parts are found by data-part), of one report's data;
  // `changes` (a diff page): per module path, how it differs in the other report
  function explorer(root, data, changes) {
  const part = (name) => root.querySelector(`[data-part="${name}"]`);
  const nodes = data.nodes;
  const modules = data.modules;
  const index = new Map(nodes.map((n, i) => [n.name, i]));
  const runOf = new Map(); // member path -> its run's first member
  for (const [first, run] of Object.entries(data.runs)) for (const p of run.members) runOf.set(p, first);
  const expanded = new Set([""]);
  const shownMember = new Map(); // an open run (by its first member) -> the index of the one member it shows
  const transparent = new Set(Object.keys(modules).filter((p) => p && modules[p].children.length === 1 && modules[p].children[0].length > 1));
  let colourBy = "flops" in data.colour_by ? "flops" : Object.keys(data.colour_by)[0] || null;
  let selected = null;
  const graph = part("graph");

  // ---------------------------------------------------------------- numbers
  function scaled(v, steps, base) {
    let i = 0;
    while (Math.abs(v) >= base && i < steps.length - 1) { v /= base; i++; }
    return (i === 0 && Number.isInteger(v) ? String(v) : v.toFixed(2)) + (steps[i] ? " " + steps[i] : "");
  }
  function format(v, unit) {
    if (v === null || v === undefined) return "—";
    if (unit === "bytes") return scaled(v, ["B", "KiB", "MiB", "GiB", "TiB"], 1024).replace(/^(\d+) B$/, "$1 B");
    if (unit === "seconds") {
      if (v < 1e-3) return (v * 1e6).toFixed(1) + " µs";
      if (v < 1) return (v * 1e3).toFixed(2) + " ms";
      return v.toFixed(2) + " s";
    }
    if (unit && unit.startsWith("si:")) { // a unit of its own (joules): SI prefixes, as fmt.si
      const symbol = unit.slice(3);
      if (v === 0) return "0 " + symbol;
      const prefixes = [[1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""], [1e-3, "m"], [1e-6, "µ"], [1e-9, "n"], [1e-12, "p"]];
      const [size, prefix] = prefixes.find(([size]) => Math.abs(Number((v / size).toFixed(2))) >= 1) || prefixes[prefixes.length - 1];
      return (v / size).toFixed(2) + " " + prefix + symbol;
    }
    return scaled(v, ["", "K", "M", "G", "T", "P"], 1000);
  }

  // ---------------------------------------------------------------- what is open
  const chains = new Map(); // module path -> its ancestors that are modules, the root's child first
  function chainOf(path) {
    let found = chains.get(path);
    if (found) return found;
    found = [];
    const parts = path ? path.split(".") : [];
    for (let d = 1; d <= parts.length; d++) {
      const p = parts.slice(0, d).join(".");
      if (p in modules) found.push(p);
    }
    chains.set(path, found);
    return found;
  }
  // the key of the box showing node i: a collapsed module or run above it, or the op itself
  const NONE = Object.freeze([]);
  let inShown = NONE; // (boxOf's side answer: the members shown that node i is in)
  function boxOf(i) {
    const n = nodes[i];
    inShown = NONE;
    if (n.kind === "input") return "in:" + n.name;
    for (const p of chainOf(n.module)) {
      if (transparent.has(p)) continue; // a container of one folded run: the run is drawn instead
      const run = runOf.get(p);
      if (run !== undefined) {
        if (!expanded.has("r:" + run)) return "r:" + run;
        if (p !== shown(run)) return { shown: shown(run) }; // another member: not drawn
        openRuns.add(run);
        inShown = inShown.concat([p]);
      }
      const key = "m:" + p + callSuffix(p, n);
      if (!expanded.has(key)) return key + (n.parts && n.parts[p] ? "~" + n.parts[p] : "");
    }
    if (n.glue) { const g = glued(n); if (g !== null) return g; }
    if (n.stretch !== undefined && !expanded.has(`s:${n.module}#${n.stretch}`)) return `s:${n.module}#${n.stretch}`;
    return "n:" + n.name;
  }

  // an op between two members of a folded run (a loop's glue), when the run is drawn: in
  // the run's box while it is closed (as report.plot draws it), else drawn with the
  // member before it (not drawn when that member is not the one shown); null: an op as any
  function glued(n) {
    const [run, k] = n.glue;
    for (const p of chainOf(run).slice(0, -1)) {
      if (transparent.has(p)) continue;
      if (runOf.has(p) || !moduleKeys(p).some((k) => expanded.has(k))) return null; // (inside a closed box, or a run's member)
    }
    if (!expanded.has("r:" + run)) return "r:" + run;
    return data.runs[run].members[k] === shown(run) ? null : { shown: shown(run) };
  }

  // a module run several times is a box per call: "m:path@call"; a call whose ops are
  // not contiguous a box per part: "m:path@call~2"
  function callSuffix(p, n) {
    if (modules[p].calls <= 1) return "";
    const depth = p.split(".").length;
    return n.call && n.call.length >= depth ? "@" + n.call[depth - 1] : "";
  }
  function modulePath(key) { // "m:a.b@2" -> "a.b"; a stretch "s:a.b#1" -> "a.b"
    let rest = key.slice(2);
    if (key.startsWith("m:") && !(rest in modules)) rest = rest.replace(/~\d+$/, "");
    if (key.startsWith("s:")) return rest.slice(0, rest.lastIndexOf("#"));
    const at = rest.lastIndexOf("@");
    return at >= 0 && !(rest in modules) && rest.slice(0, at) in modules ? rest.slice(0, at) : rest;
  }
  function callOf(key) {
    const at = /^@(\d+)/.exec(key.slice(2 + modulePath(key).length));
    return at ? Number(at[1]) : null;
  }
  function partOf(key) { // the part of a call a box shows (null: the whole call, or its first part)
    const part = key.startsWith("m:") ? /~(\d+)$/.exec(key.slice(2 + modulePath(key).length)) : null;
    return part ? Number(part[1]) : null;
  }
  function openKey(key) { return partOf(key) !== null ? key.replace(/~\d+$/, "") : key; } // a part opens its whole call

  let openRuns = new Set(); // the open runs drawn (their member shown), for the stepper above the graph
  function shown(run) { return data.runs[run].members[shownMember.get(run) || 0]; }

  function visible() {
    openRuns = new Set();
    const boxes = new Map(); // key -> {key, nodes: [i], order}
    const of = new Array(nodes.length);
    // a node not drawn (in a member of an open run that is not shown): the boxes it reads,
    // through other nodes not drawn, so an edge runs past the members left out; but not
    // what the member shown reads itself from outside (a mask, a rotary table): its edge
    // is drawn there, and the members left out add none
    const through = new Array(nodes.length), hidden = new Array(nodes.length), members = new Array(nodes.length);
    for (let i = 0; i < nodes.length; i++) {
      const key = boxOf(i);
      of[i] = typeof key === "object" ? null : key;
      hidden[i] = typeof key === "object" ? key.shown : null;
      members[i] = inShown;
    }
    const readByShown = new Map(); // a member shown -> the boxes outside it that it reads
    for (let i = 0; i < nodes.length; i++) {
      for (const m of members[i]) {
        let read = readByShown.get(m);
        if (!read) readByShown.set(m, (read = new Set()));
        for (const a of nodes[i].args) {
          const j = index.get(a);
          if (j !== undefined && of[j] !== null && !members[j].includes(m)) read.add(of[j]);
        }
      }
    }
    const sources = (j) => (of[j] !== null ? [of[j]] : through[j]);
    for (let i = 0; i < nodes.length; i++) {
      const key = of[i];
      if (key === null) {
        const found = new Set(), drawn = readByShown.get(hidden[i]);
        for (const a of nodes[i].args) {
          const j = index.get(a);
          if (j === undefined || (of[j] !== null && drawn && drawn.has(of[j]))) continue;
          for (const s of sources(j)) found.add(s);
        }
        through[i] = [...found];
        continue;
      }
      let box = boxes.get(key);
      if (!box) { box = { key: key, nodes: [], order: boxes.size }; boxes.set(key, box); }
      box.nodes.push(i);
    }
    boxes.set("out", { key: "out", nodes: [], order: boxes.size });
    const edges = connect(boxes, of, sources);
    return { boxes: [...boxes.values()], edges: [...edges.values()] };
  }

  // the edges between boxes, each [from, to, the nodes whose outputs it carries]; per box
  // the nodes whose outputs enter it (`entering`) and the last that leaves it (`leaving`),
  // the shapes it shows, as report.plot finds them
  function connect(boxes, of, sources) {
    const edges = new Map();
    const add = (a, b, j) => {
      if (a === b) return;
      let edge = edges.get(a + "\u0000" + b);
      if (!edge) edges.set(a + "\u0000" + b, (edge = [a, b, []]));
      if (!edge[2].includes(j)) edge[2].push(j);
      const into = boxes.get(b);
      if (!into.entering.includes(j)) into.entering.push(j);
      if (of[j] === a) boxes.get(a).leaving = j;
    };
    for (const box of boxes.values()) { box.entering = []; box.leaving = null; }
    for (let i = 0; i < nodes.length; i++) {
      if (of[i] === null) continue;
      for (const a of nodes[i].args) if (index.has(a)) for (const s of sources(index.get(a))) add(s, of[i], index.get(a));
    }
    for (const a of data.output.args) if (index.has(a)) for (const s of sources(index.get(a))) add(s, "out", index.get(a));
    return edges;
  }
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
  function describe(box) {
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
  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  // ---------------------------------------------------------------- layout: layers by longest path
  function layout(boxes, edges, infos) {
    const order = new Map(boxes.map((b, i) => [b.key, i]));
    const preds = boxes.map(() => []);
    for (const [a, b] of edges) if (order.get(a) < order.get(b)) preds[order.get(b)].push(order.get(a));
    const layer = new Array(boxes.length).fill(0);
    for (let i = 0; i < boxes.length; i++) for (const p of preds[i]) layer[i] = Math.max(layer[i], layer[p] + 1);
    const lanes = waypoints(edges, order, layer, preds), room = [];
    for (const [a, b, carried] of edges) { // a lane is as wide as its edge's label, which runs in it
      measure.font = "9px sans-serif";
      const lane = lanes.get(a + "\u0000" + b), width = Math.ceil(measure.measureText(carries(carried)).width) + 6;
      if (lane) for (const d of lane.slice(1, -1)) room[d] = width;
    }
    const w = (i) => (i < boxes.length ? infos[i].w : room[i]), h = (i) => (i < boxes.length ? infos[i].h : 0);
    const rows = [];
    for (let i = 0; i < layer.length; i++) (rows[layer[i]] = rows[layer[i]] || []).push(i);
    const x = new Array(layer.length).fill(0);
    const y = new Array(layer.length).fill(0);
    const tops = [], bottoms = [];
    let top = 20;
    for (const row of rows) {
      if (!row) continue;
      // order a row by where its boxes' inputs sit (barycentre), then by graph order
      const centre = (i) => (preds[i].length ? preds[i].reduce((s, p) => s + x[p], 0) / preds[i].length : 0);
      row.sort((a, b) => centre(a) - centre(b) || a - b);
      const widths = row.map(w);
      const total = widths.reduce((s, w) => s + w, 0) + 30 * (row.length - 1);
      const want = row.reduce((s, i) => s + centre(i), 0) / row.length;
      let left = want - total / 2;
      let height = 0;
      row.forEach((i, j) => { x[i] = left + widths[j] / 2; left += widths[j] + 30; height = Math.max(height, h(i)); });
      for (const i of row) { y[i] = top + height / 2; tops[i] = top; bottoms[i] = top + height; }
      top += height + 36;
    }
    return { x: x, y: y, order: order, height: top, lanes: lanes, tops: tops, bottoms: bottoms, room: room };
  }

  // an edge down more than one layer gets a waypoint in each layer it crosses (a slot of
  // the layer, as a box has, so the edge runs beside the boxes there, never behind them):
  // per edge, the indices it runs through, its ends included; a waypoint's one
  // predecessor is the point above it, and the edge's end is placed below the last
  function waypoints(edges, order, layer, preds) {
    const lanes = new Map();
    for (const [a, b] of edges) {
      const i = order.get(a), j = order.get(b);
      if (i >= j) continue; // (an edge back: drawn as a curve aside)
      const lane = [i];
      for (let l = layer[i] + 1; l < layer[j]; l++) {
        const d = layer.length;
        layer.push(l);
        preds.push([lane[lane.length - 1]]);
        lane.push(d);
      }
      if (lane.length > 1) preds[j][preds[j].indexOf(i)] = lane[lane.length - 1];
      lane.push(j);
      lanes.set(a + "\u0000" + b, lane);
    }
    return lanes;
  }

  // the path of an edge along its lane: straight down through each layer it crosses (beside
  // the boxes there), curving only in the gaps between layers, where there are no boxes;
  // and where its label goes: in its lane beside the first layer it crosses, or for an edge
  // to the next layer the middle of the gap
  function route(lane, at, infos, shift) {
    const X = (k) => at.x[k] + shift;
    const [first, last] = [lane[0], lane[lane.length - 1]];
    let below = at.y[first] + infos[first].h / 2;
    let d = `M${X(first)},${below}V${at.bottoms[first]}`;
    below = at.bottoms[first];
    let label = null;
    for (let k = 1; k < lane.length; k++) {
      const [from, to] = [lane[k - 1], lane[k]];
      const mid = (below + at.tops[to]) / 2;
      if (!label) label = to !== last ? [X(to), (at.tops[to] + at.bottoms[to]) / 2] : [(X(from) + X(to)) / 2, mid];
      d += `C${X(from)},${mid} ${X(to)},${mid} ${X(to)},${at.tops[to]}`;
      below = at.bottoms[to];
      if (to !== last) d += `V${below}`;
    }
    d += `V${at.y[last] - infos[last].h / 2}`;
    return { d: d, label: label };
  }

  // ---------------------------------------------------------------- colours
  const STOPS = [[255, 255, 204], [254, 217, 118], [253, 141, 60], [227, 26, 28], [128, 0, 38]]; // YlOrRd
  function colour(t) {
    const s = Math.max(0, Math.min(1, t)) * (STOPS.length - 1);
    const i = Math.min(Math.floor(s), STOPS.length - 2);
    const f = s - i;
    const c = STOPS[i].map((v, j) => Math.round(v + f * (STOPS[i + 1][j] - v)));
    return [`rgb(${c[0]},${c[1]},${c[2]})`, 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2] < 128];
  }
  function scale(values) {
    let lo = Infinity, hi = 0; // (a loop: a spread of 100,000 values overflows the stack)
    for (const v of values) if (v !== null && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (!hi) return null;
    if (hi > 100 * lo) return { log: true, lo: lo, hi: hi, at: (v) => Math.log(v / lo) / Math.log(hi / lo) };
    return { log: false, lo: 0, hi: hi, at: (v) => v / hi };
  }

  // one scale per figure, whatever is open: from the smallest op to the largest box that
  // can be drawn (a module, a folded run, a stretch of ops), so a colour means the same
  // figure at every level and the costliest leaf stands out from anywhere
  const spans = new Map();
  function spanValues(field) { // every op's value and every box's sum that can be drawn: one scale at every level
    if (spans.has(field)) return spans.get(field);
    const sums = new Map(), add = (key, v) => sums.set(key, (sums.get(key) || 0) + v), values = [];
    for (const n of nodes) {
      const v = n.values[field];
      if (n.kind !== "op" || v === null || v === undefined) continue;
      values.push(v);
      for (const p of chainOf(n.module)) add(p, v);
      if (n.stretch !== undefined) add(`s:${n.module}#${n.stretch}`, v);
    }
    for (const run of Object.values(data.runs)) add("r:" + run.members[0], run.members.reduce((s, p) => s + (sums.get(p) || 0), 0));
    const all = values.concat([...sums.values()]);
    spans.set(field, all);
    return all;
  }
  function span(field) { return scale(withOther(spanValues(field))); } // (a diff page: over both reports)

  // ---------------------------------------------------------------- drawing
  function draw() {
    const { boxes, edges } = visible();
    split = new Set(boxes.filter((b) => partOf(b.key)).map((b) => openKey(b.key)));
    const infos = boxes.map(describe);
    const at = layout(boxes, edges, infos);
    const norm = colourBy ? span(colourBy) : null;
    let minX = Infinity, maxX = -Infinity;
    boxes.forEach((b, i) => { minX = Math.min(minX, at.x[i] - infos[i].w / 2); maxX = Math.max(maxX, at.x[i] + infos[i].w / 2); });
    for (let i = boxes.length; i < at.x.length; i++) { minX = Math.min(minX, at.x[i] - at.room[i] / 2); maxX = Math.max(maxX, at.x[i] + at.room[i] / 2); } // (the edges' lanes)
    const shift = 20 - minX;
    const parts = [];
    for (const [a, b, carried] of edges) {
      const i = at.order.get(a), j = at.order.get(b);
      const x1 = at.x[i] + shift, y1 = at.y[i] + infos[i].h / 2, x2 = at.x[j] + shift, y2 = at.y[j] - infos[j].h / 2;
      const lane = at.lanes.get(a + "\u0000" + b);
      const path = lane ? route(lane, at, infos, shift) : { d: `M${x1},${y1} C${x1 + 60},${y1 + 40} ${x2 + 60},${y2 - 40} ${x2},${y2}`, label: null };
      const ends = `data-from="${esc(a)}" data-to="${esc(b)}"`;
      parts.push(`<path class="edge${lane ? "" : " back"}" ${ends} d="${path.d}" marker-end="url(#arrow)"/>`);
      if (path.label) parts.push(`<text class="edge-label" ${ends} x="${path.label[0]}" y="${path.label[1] + 3}">${esc(carries(carried))}</text>`);
    }
    boxes.forEach((b, i) => {
      const info = infos[i];
      let fill = info.kind === "io" ? "#dddddd" : "#ffffff", dark = false;
      if (norm && info.value !== null && info.value > 0 && b.nodes.length && info.kind !== "io") [fill, dark] = colour(norm.at(info.value));
      const cls = `box ${info.kind}${info.change ? " " + info.change : ""}${dark ? " dark" : ""}${b.key === selected ? " selected" : ""}${isExpandable(b.key) ? " expandable" : ""}`;
      const x = at.x[i] + shift - info.w / 2, y = at.y[i] - info.h / 2;
      let text = "";
      info.lines.forEach(([t, bold], j) => {
        text += `<text x="${info.w / 2}" y="${17 + 15 * j}" class="${bold ? "title" : "line"}">${esc(t)}</text>`;
      });
      if (info.step) { // previous and next member of the run
        const arrow = (side, delta, on) => `<text x="${side}" y="17" class="step${on ? "" : " off"}"${on ? ` data-step="${delta}"` : ""}>${delta < 0 ? "◀" : "▶"}</text>`;
        text += arrow(13, -1, info.step.index > 0) + arrow(info.w - 13, 1, info.step.index < info.step.count - 1);
      }
      parts.push(`<g class="${cls}" data-key="${esc(b.key)}"${info.attr} transform="translate(${x},${y})">` +
        `<rect width="${info.w}" height="${info.h}" rx="5" fill="${fill}"/>${text}</g>`);
    });
    const width = maxX - minX + 40, height = at.height;
    graph.innerHTML = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>' +
      '<g class="view">' + parts.join("") + "</g>";
    const centres = new Map(boxes.map((b, i) => [b.key, [at.x[i] + shift, at.y[i]]]));
    current = { boxes: boxes, infos: infos, centres: centres };
    mini.setAttribute("viewBox", `0 0 ${width} ${height}`);
    mini.innerHTML = boxes.map((b, i) => `<rect x="${at.x[i] + shift - infos[i].w / 2}" y="${at.y[i] - infos[i].h / 2}" width="${infos[i].w}" height="${infos[i].h}"/>`).join("") + '<rect class="sight"/>';
    zoom.setExtent(width, height);
    zoom.apply();
    // each open run, its member shown and arrows to the others (a member opened has no box of its own)
    part("runs").innerHTML = [...openRuns].map((run) => {
      const members = data.runs[run].members, i = members.indexOf(shown(run));
      const arrow = (delta, on) => `<button type="button" data-run="${esc(run)}" data-step="${delta}"${on ? "" : " disabled"}>${delta < 0 ? "◀" : "▶"}</button>`;
      return `<div>${esc(data.runs[run].label)}: ${arrow(-1, i > 0)} <span data-shown="${esc(members[i])}">${esc(members[i])}</span> (${i + 1} of ${members.length}) ${arrow(1, i < members.length - 1)}</div>`;
    }).join("");
    drawScale(norm);
    drawCrumbs();
    drawn();
  }
  let current = null;
  let split = new Set(); // the calls drawn in parts (their first part's key), as describe names them
  const mini = part("minimap");
  const zoom = fxinspectZoom(graph, mini);
  function moduleKeys(p) { // a module's box keys: one, or one per call
    const calls = modules[p].calls;
    return calls > 1 ? Array.from({ length: calls }, (_, i) => `m:${p}@${i}`) : ["m:" + p];
  }
  function isExpandable(key) { return key.startsWith("m:") || key.startsWith("r:") || key.startsWith("s:"); }

  function drawScale(norm) {
    const bar = part("scale");
    if (!norm || !colourBy) { bar.innerHTML = ""; return; }
    const stops = STOPS.map((c, i) => `rgb(${c.join(",")}) ${(100 * i) / (STOPS.length - 1)}%`).join(",");
    const marks = [];
    if (norm.log) {
      const first = Math.ceil(Math.log10(norm.lo)), last = Math.floor(Math.log10(norm.hi));
      const step = Math.max(1, Math.ceil((last - first + 1) / 5));
      for (let k = first; k <= last; k += step) marks.push(10 ** k);
    } else {
      for (let k = 0; k <= 4; k++) marks.push((norm.hi * k) / 4);
    }
    const unit = data.units[colourBy];
    const spanned = `one scale at every level: ${trim(format(norm.lo, unit))} (smallest op) to ${trim(format(norm.hi, unit))} (largest box)`;
    bar.innerHTML = `<span class="scale-title" title="${esc(spanned)}">${esc(data.colour_by[colourBy])} per box<br><small class="span">${esc(spanned)}</small></span>` +
      `<div class="gradient" style="background:linear-gradient(to right,${stops})"></div>` +
      `<div class="marks">${marks.map((v) => `<span style="left:${100 * norm.at(v)}%">${esc(trim(format(v, unit)))}</span>`).join("")}</div>`;
  }

  function trim(text) { return text.replace(/\.0+(?= )/, "").replace(/(\.\d*?)0+(?= )/, "$1"); } // 100.00 K -> 100 K

  function drawCrumbs() {
    const crumbs = part("crumbs");
    if (!selected || !(selected.startsWith("m:") || selected.startsWith("r:"))) { crumbs.innerHTML = ""; return; }
    const path = selected.startsWith("m:") ? modulePath(selected) : data.runs[selected.slice(2)].label;
    const parts = path.split(".");
    crumbs.innerHTML = '<a data-crumb="">model</a>' +
      parts.map((p, i) => ` › <a data-crumb="${esc(parts.slice(0, i + 1).join("."))}">${esc(p)}</a>`).join("");
  }

  // ---------------------------------------------------------------- the side panel and the table
  function panel(key) {
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

  // ---------------------------------------------------------------- interaction
  function keyOf(el) { const g = el.closest("[data-key]"); return g ? g.dataset.key : null; }
  function toggle(key) {
    if (expanded.has(key)) {
      for (const k of [...expanded]) if (k === key || within(k, key)) expanded.delete(k);
    } else {
      expanded.add(key);
    }
  }
  function pathOfKey(k) { return k.startsWith("r:") ? k.slice(2) : modulePath(k); } // a module's path, or a run's first member
  function within(k, key) { // is box k inside the module or run of key?
    if (key.startsWith("s:")) return false;
    const p = pathOfKey(k);
    if (k.startsWith("s:") && key.startsWith("m:") && p === modulePath(key)) return true;
    if (key.startsWith("m:")) { const q = modulePath(key); return p.startsWith(q + "."); }
    const run = data.runs[key.slice(2)];
    return run.members.some((m) => p === m || p.startsWith(m + "."));
  }
  // a run shows one member at a time: step to the one `delta` away, what is open inside
  // the member shown staying open in the next; the key of the member now shown
  function step(run, delta) {
    const members = data.runs[run].members;
    const from = shownMember.get(run) || 0, to = Math.max(0, Math.min(members.length - 1, from + delta));
    const [a, b] = [members[from], members[to]];
    shownMember.set(run, to);
    for (const k of [...expanded]) {
      const moved = movedKey(k, a, b);
      if (moved !== k) { expanded.delete(k); if (!moved.startsWith("r:") || moved.slice(2) in data.runs) expanded.add(moved); }
    }
    return b;
  }
  function movedKey(k, a, b) { // key k of member a's subtree, as the same place in member b
    if (!k || !/^[mrs]:/.test(k)) return k;
    const rest = k.slice(2);
    if (k.startsWith("r:") && rest === a) return k; // (the run itself: a run is keyed by its first member)
    return rest === a || (rest.startsWith(a) && ".@#".includes(rest[a.length])) ? k.slice(0, 2) + b + rest.slice(a.length) : k;
  }
  graph.addEventListener("click", (e) => {
    const key = keyOf(e.target);
    if (!key) return;
    const before = zoom.screen(current.centres.get(key));
    const arrow = e.target.closest("[data-step]");
    let anchor = key;
    if (arrow) {
      const path = modulePath(key);
      anchor = movedKey(key, path, step(runOf.get(path), Number(arrow.dataset.step)));
      selected = anchor;
    } else {
      if (isExpandable(key)) toggle(openKey(key));
      selected = key;
    }
    draw();
    // the box clicked (or, opened, the first box inside it) stays where it was on the screen
    if (!current.centres.has(anchor)) anchor = (current.boxes.find((b) => within(b.key, key)) || {}).key;
    if (anchor) zoom.keep(current.centres.get(anchor), before);
    panel(selected);
  });
  graph.addEventListener("mouseover", (e) => {
    const key = keyOf(e.target);
    if (!key) return;
    const i = current.boxes.findIndex((b) => b.key === key);
    tooltip.innerHTML = tip(current.boxes[i], current.infos[i]);
    tooltip.hidden = false;
    place(e);
  });
  graph.addEventListener("mousemove", place);
  graph.addEventListener("mouseout", (e) => { if (!keyOf(e.relatedTarget || document.body)) tooltip.hidden = true; });

  // the tooltip beside the pointer, inside the window: on its left or above it when there
  // is no room on the right or below, and never past the window's edge
  function place(e) {
    const w = tooltip.offsetWidth, h = tooltip.offsetHeight, W = document.documentElement.clientWidth, H = document.documentElement.clientHeight;
    let x = e.clientX + 14, y = e.clientY + 14;
    if (x + w > W - 4) x = e.clientX - 14 - w;
    if (y + h > H - 4) y = e.clientY - 14 - h;
    x = Math.max(4, Math.min(x, W - 4 - w));
    y = Math.max(4, Math.min(y, H - 4 - h));
    tooltip.style.left = x + window.scrollX + "px";
    tooltip.style.top = y + window.scrollY + "px";
  }
  function tip(box, info) {
    const rows = [];
    const k = box.key;
    if (k.startsWith("m:")) {
      const m = modules[modulePath(k)];
      rows.push(["type", m.type], ["params", format(m.params, "count")]);
      for (const [f, v] of Object.entries(m.figures)) rows.push([data.labels[f] || f, v]);
    } else {
      for (const f of Object.keys(data.colour_by)) rows.push([data.colour_by[f], format(info.sum(f), data.units[f])]);
    }
    const n = box.leaving !== null ? nodes[box.leaving] : box.nodes.length ? nodes[box.nodes[box.nodes.length - 1]] : null;
    if (n) rows.push(["output", n.shape + " " + n.dtype]);
    return `<b>${esc(info.lines[0][0])}</b><table>` + rows.map(([a, b]) => `<tr><th>${esc(a)}</th><td>${esc(b)}</td></tr>`).join("") + "</table>";
  }

  part("crumbs").addEventListener("click", (e) => {
    const a = e.target.closest("[data-crumb]");
    if (!a) return;
    const path = a.dataset.crumb;
    for (const k of [...expanded]) if (k && (!path || within(k, "m:" + path))) expanded.delete(k);
    selected = path && path in modules ? moduleKeys(path)[0] : null;
    draw();
    panel(selected);
  });
  part("collapse").addEventListener("click", () => controls.collapseAll());
  part("fit").addEventListener("click", () => zoom.fit());
  // the view drawn as a file, named after the model (its root module's type)
  const saved = fxinspectExport(graph, ((modules[""] || {}).type || "model").replace(/[^\w.-]+/g, "_"));
  part("svg").addEventListener("click", () => saved.svg());
  part("png").addEventListener("click", () => saved.png());
  part("runs").addEventListener("click", (e) => {
    const arrow = e.target.closest("[data-run]");
    if (!arrow) return;
    const run = arrow.dataset.run, from = shown(run);
    if (selected) selected = movedKey(selected, from, step(run, Number(arrow.dataset.step)));
    else step(run, Number(arrow.dataset.step));
    draw();
    panel(selected);
  });

  // open the way to a hit of the search (a module's path or an op's node name), select it
  // and bring it into sight: a run above it steps to the member holding it
  function reveal(hit) {
    const nodeName = hit.node || null;
    const target = nodeName ? nodes[index.get(nodeName)].module : hit.path;
    // open every module (and run) above the target, and the target's own module for a node
    const chain = chainOf(target);
    const opened = nodeName ? chain : chain.slice(0, -1);
    for (const p of chain) {
      const run = runOf.get(p);
      if (run !== undefined) { expanded.add("r:" + run); step(run, data.runs[run].members.indexOf(p) - (shownMember.get(run) || 0)); }
    }
    for (const p of opened) for (const k of moduleKeys(p)) expanded.add(k);
    const found = nodeName ? nodes[index.get(nodeName)] : null;
    if (found && found.stretch !== undefined) expanded.add(`s:${found.module}#${found.stretch}`);
    selected = nodeName ? (found.kind === "input" ? "in:" : "n:") + nodeName : moduleKeys(target)[0];
    const run = runOf.get(target);
    if (!nodeName && run !== undefined) expanded.add("r:" + run);
    if (!nodeName) for (const k of moduleKeys(target)) if (expanded.has(k)) toggle(k); // a module hit open: closed, to be seen
    if (!nodeName && transparent.has(target)) { // a container of one folded run: the run is its box
      selected = "r:" + modules[target].children[0][0];
      expanded.delete(selected);
    }
    draw();
    panel(selected);
    if (current.centres.has(selected)) zoom.centre(current.centres.get(selected), Math.max(zoom.view.k, 1));
  }
  const finder = fxinspectFind(part("search"), part("hits"), data, reveal);

  const choose = part("colour");
  choose.innerHTML = Object.entries(data.colour_by).map(([k, v]) => `<option value="${k}"${k === colourBy ? " selected" : ""}>${esc(v)}</option>`).join("") + '<option value="">no colour</option>';
  choose.addEventListener("change", () => { colourBy = choose.value || null; draw(); });

  // ---------------------------------------------------------------- the memory timeline
  function timeline() {
    const m = data.memory;
    const chart = part("memory");
    if (!m) { chart.hidden = true; return; }
    const W = 900, H = 180, L = 70, B = 24;
    const last = m.timeline[m.timeline.length - 1][0] || 1;
    const top = Math.max(...m.timeline.map((e) => e[1])) || 1;
    const X = (op) => L + ((W - L - 10) * op) / last, Y = (b) => H - B - ((H - B - 10) * b) / top;
    let d = "";
    // a step line: what is held stays until the next event
    m.timeline.forEach(([op, b], i) => { d += i ? `H${X(op).toFixed(1)}V${Y(b).toFixed(1)}` : `M${X(op).toFixed(1)},${Y(b).toFixed(1)}`; });
    const marks = [0, top / 2, top].map((b) => `<text x="${L - 6}" y="${Y(b) + 4}" class="axis" text-anchor="end">${esc(format(b, "bytes"))}</text>`).join("");
    const back = m.backward_start !== null ? `<line x1="${X(m.backward_start)}" x2="${X(m.backward_start)}" y1="10" y2="${H - B}" class="phase"/><text x="${X(m.backward_start) + 4}" y="20" class="axis">backward</text>` : "";
    chart.innerHTML = `<h2>Memory</h2><svg class="timeline" width="${W}" height="${H}" xmlns="${svgNS}"><path d="${d}" class="line"/>${marks}${back}` +
      `<text x="${L}" y="${H - 6}" class="axis">aten op →  (bytes the run allocated and holds, on top of ${esc(format(m.resident, "bytes"))} resident; peak ${esc(format(m.peak, "bytes"))} at ${esc(m.peak_node)} (${esc(m.peak_phase)}))</text>` +
      `<circle class="cursor" r="4" style="display:none"/></svg>`;
    const svg = chart.querySelector(".timeline"), cursor = chart.querySelector(".cursor");
    svg.addEventListener("mousemove", (e) => {
      const box = svg.getBoundingClientRect();
      const op = ((e.clientX - box.left - L) / (W - L - 10)) * last;
      let best = 0;
      for (let i = 0; i < m.timeline.length; i++) if (Math.abs(m.timeline[i][0] - op) < Math.abs(m.timeline[best][0] - op)) best = i;
      const [at, bytes] = m.timeline[best];
      cursor.setAttribute("cx", X(at)); cursor.setAttribute("cy", Y(bytes)); cursor.style.display = "";
      tooltip.innerHTML = `<b>${esc(nodeAt(at))}</b><table><tr><th>aten op</th><td>${at}</td></tr><tr><th>held</th><td>${esc(format(bytes, "bytes"))}</td></tr></table>`;
      tooltip.hidden = false;
      place(e);
    });
    svg.addEventListener("mouseleave", () => { tooltip.hidden = true; cursor.style.display = "none"; });
    function nodeAt(op) { // the node whose ops include op index `op` (ops after a start belong to it)
      if (m.backward_start !== null && op > m.backward_start) return "backward";
      let lo = 0, hi = m.starts.length - 1, found = null;
      while (lo <= hi) { const mid = (lo + hi) >> 1; if (m.starts[mid][0] < op) { found = m.starts[mid][1]; lo = mid + 1; } else hi = mid - 1; }
      return found || "before the first node";
    }
  }

  // ---------------------------------------------------------------- a diff page: two panes as one
  // Paired, each pane opens, steps, colours, zooms and pans as the other does (where the
  // other report has the same path: one it lacks is named in a note), and both colour on
  // one scale, over the boxes drawn in both.
  let other = null, following = false;
  function withOther(values) { return other ? values.concat(other.values()) : values; }
  function drawn() { // (after each draw) the other pane follows what this one did, then this one takes the shared scale
    if (!other) return;
    const bar = part("scale");
    const said = bar.querySelector("small.span"); // (said under the bar's title, not over the bar)
    if (said) said.textContent = said.textContent.replace("one scale at every level", "one scale for both reports, at every level");
    if (following) return;
    following = true;
    try { say([]); other.follow(state()); draw(); } finally { following = false; }
  }
  function state() { // what is open and shown, by paths (a run by its first member, its member shown by path)
    const shownPaths = {};
    for (const [run, i] of shownMember) shownPaths[run] = data.runs[run].members[i];
    return { expanded: [...expanded].filter((k) => k), shown: shownPaths, selected: selected, colourBy: colourBy };
  }
  function here(key) { // another report's box key as this report's keys ([]: nothing to open; null: its module is not here)
    if (key.startsWith("s:")) {
      const [module, stretch] = [key.slice(2, key.lastIndexOf("#")), Number(key.slice(key.lastIndexOf("#") + 1))];
      return nodes.some((n) => n.module === module && n.stretch === stretch) ? [key] : [];
    }
    if (key.startsWith("n:") || key.startsWith("in:")) return index.has(key.slice(key.indexOf(":") + 1)) ? [key] : [];
    if (key.startsWith("r:")) {
      const run = runOf.get(key.slice(2));
      return run !== undefined ? ["r:" + run] : key.slice(2) in modules ? [] : null;
    }
    const rest = key.slice(2), at = rest.lastIndexOf("@");
    const path = rest in modules || at < 0 ? rest : rest.slice(0, at);
    if (!(path in modules)) return null;
    const call = path === rest ? null : Number(rest.slice(at + 1));
    return call !== null && call < modules[path].calls && modules[path].calls > 1 ? [key] : moduleKeys(path);
  }
  function follow(s) { // open, show and select as the other pane does; the box it acted on stays where it was here
    following = true;
    try {
      const missing = [];
      const mapped = (k) => { const mine = here(k); if (mine === null) missing.push(pathOfKey(k).split("@")[0]); return mine || []; };
      const anchor = s.selected ? (mapped(s.selected)[0] || null) : null;
      const before = anchor && current.centres.has(anchor) ? zoom.screen(current.centres.get(anchor)) : null;
      expanded.clear(); expanded.add("");
      for (const k of s.expanded) for (const mine of mapped(k)) expanded.add(mine);
      shownMember.clear();
      for (const member of Object.values(s.shown)) {
        const run = runOf.get(member);
        if (run !== undefined) shownMember.set(run, data.runs[run].members.indexOf(member));
        else if (!(member in modules)) missing.push(member);
      }
      if (s.colourBy === null || s.colourBy in data.colour_by) { colourBy = s.colourBy; choose.value = s.colourBy || ""; }
      selected = anchor;
      draw();
      const kept = anchor && (current.centres.has(anchor) ? anchor : (current.boxes.find((b) => within(b.key, anchor)) || {}).key);
      if (before && kept) zoom.keep(current.centres.get(kept), before);
      panel(selected);
      say([...new Set(missing)]);
    } finally { following = false; }
  }
  function say(missing) { // the paths the other pane opened that this report lacks
    let note = root.querySelector(".canvas .missing");
    if (!note) { note = document.createElement("div"); note.className = "missing"; root.querySelector(".canvas").appendChild(note); }
    note.hidden = !missing.length;
    note.textContent = missing.length ? "not in this report: " + missing.join(", ") : "";
  }
  function pairing() {
    return {
      pair(pane) { // pane: the other explorer's controls; the two follow each other from here on
        if (other) return;
        other = pane;
        pane.pair(controls);
        zoom.onMove((before, after) => pane.followView(before, after));
        draw();
      },
      follow: follow,
      followView(before, after) { zoom.follow(before, after); },
      values() { return colourBy ? spanValues(colourBy) : []; }, // (the values this pane's scale spans)
      fill(v) { const norm = scale(withOther(controls.values())); return norm ? colour(norm.at(v))[0] : null; }, // (the fill of a box of value v)
    };
  }

  // for scripts and tests: open everything, close everything, count the boxes drawn
  const controls = {
    expandAll() {
      for (const p of Object.keys(modules)) if (p) for (const k of moduleKeys(p)) expanded.add(k);
      for (const first of Object.keys(data.runs)) expanded.add("r:" + first);
      for (const n of nodes) if (n.stretch !== undefined) expanded.add(`s:${n.module}#${n.stretch}`);
      draw();
      zoom.fit();
    },
    collapseAll() { expanded.clear(); expanded.add(""); shownMember.clear(); selected = null; draw(); zoom.fit(); panel(null); },
    boxes() { return current.boxes.length; },
    // every module above `depth` open, each run at its first member: report.plot(depth=depth)'s boxes
    openTo(depth) {
      expanded.clear(); expanded.add(""); shownMember.clear();
      const above = new Set(); // the modules with a child that ran
      for (const n of nodes) if (n.kind === "op") for (const p of chainOf(n.module)) if (p !== n.module) above.add(p);
      for (const p of above) if (p.split(".").length < depth) for (const k of moduleKeys(p)) expanded.add(k);
      for (const first of Object.keys(data.runs)) if (first.split(".").length < depth) expanded.add("r:" + first);
      draw();
      zoom.fit();
    },
    drawn() { return current.boxes.map((b) => ({ key: b.key, nodes: b.nodes.map((i) => nodes[i].name) })); }, // each box's nodes
    fit() { zoom.fit(); },
    view() { return { k: zoom.view.k, x: zoom.view.x, y: zoom.view.y }; }, // screen = drawing * k + (x, y)
  };

  Object.assign(controls, pairing());

  // the first view: the root's children, repeated blocks folded, all in sight
  draw();
  zoom.fit();
  panel(null);
  table();
  timeline();
  return controls;
  }

  // a page of one report (#fxinspect-data), or of two side by side (#fxinspect-diff)
  const one = document.getElementById("fxinspect-data");
  if (one) {
    window.fxinspect = explorer(document.querySelector(".explorer"), fxinspectUnpack(JSON.parse(one.textContent)), null);
  } else {
    const both = JSON.parse(document.getElementById("fxinspect-diff").textContent);
    const roots = document.querySelectorAll(".explorer");
    window.fxinspect = [explorer(roots[0], fxinspectUnpack(both.this), both.changes), explorer(roots[1], fxinspectUnpack(both.other), both.changes)];
    window.fxinspect[0].pair(window.fxinspect[1]);
  }
  window.fxinspectReadyAt = performance.now();
  window.fxinspectReady = true;
})();
