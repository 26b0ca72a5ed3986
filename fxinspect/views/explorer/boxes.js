// fxinspect explorer: which boxes and edges are drawn, from what is open (`expanded`, the
// keys of the boxes opened, and `shownMember`, the member each open run shows). A closed
// module is a box per call (per part of a call whose ops are not contiguous), a closed
// folded run one box, an open run its member shown, drawn for all (report.plot's boxes and
// edges when every module above a depth is open). Loaded before explorer.js.
function fxinspectBoxes(data, expanded, shownMember) {
  "use strict";
  const nodes = data.nodes;
  const modules = data.modules;
  const index = new Map(nodes.map((n, i) => [n.name, i]));
  const runOf = new Map(); // member path -> its run's first member
  for (const [first, run] of Object.entries(data.runs)) for (const p of run.members) runOf.set(p, first);
  // a container of one folded run (no box of its own: the run is drawn instead)
  const transparent = new Set(Object.keys(modules).filter((p) => p && modules[p].children.length === 1 && modules[p].children[0].length > 1));

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
  // the key of the box showing node i: a collapsed module or run above it, or the op itself;
  // for a node of a member an open run does not show, {run, member} (or its glue: {run, glue})
  function boxOf(i) {
    const n = nodes[i];
    if (n.kind === "input") return "in:" + n.name;
    for (const p of chainOf(n.module)) {
      if (transparent.has(p)) continue; // a container of one folded run: the run is drawn instead
      const run = runOf.get(p);
      if (run !== undefined) {
        if (!expanded.has("r:" + run)) return "r:" + run;
        if (p !== shown(run)) return { run: run, member: p }; // another member: not drawn
        openRuns.add(run);
      }
      const key = "m:" + p + callSuffix(p, n);
      if (!expanded.has(key)) return key + (n.parts && n.parts[p] ? "~" + n.parts[p] : "");
    }
    if (n.glue) { const g = glued(n); if (g !== null) return g; }
    if (n.stretch !== undefined && !expanded.has(`s:${n.module}#${n.stretch}`)) return `s:${n.module}#${n.stretch}`;
    return "n:" + n.name;
  }

  // an op between two members of a folded run (a loop's glue), when the run is drawn: in
  // the run's box while it is closed (as report.plot draws it), else drawn once, as the
  // members are: the glue after the member shown (before it, for the last), the others
  // {run, glue} (not drawn); null: an op as any
  function glued(n) {
    const [run, k] = n.glue;
    for (const p of chainOf(run).slice(0, -1)) {
      if (transparent.has(p)) continue;
      if (!moduleKeys(p).some((k) => expanded.has(k))) return null; // (inside a closed box)
    }
    if (!expanded.has("r:" + run)) return "r:" + run;
    return k === glueShown(run) ? null : { run: run, glue: k };
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

  // the members an open run does not show, drawn as the one it shows (as report.plot
  // draws a run's members as one box per place in them): a node of another member is
  // drawn as its twin, the node at the same place in the member shown, and so is the glue
  // between other members; per member (and per run's glue) its nodes, in order
  let ofMember = null, ofGlue = null;
  function sortMembers() {
    ofMember = new Map(); ofGlue = new Map();
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i];
      if (n.kind !== "op") continue;
      for (const p of chainOf(n.module)) if (runOf.has(p)) (ofMember.get(p) || ofMember.set(p, []).get(p)).push(i);
      if (n.glue) {
        const glues = ofGlue.get(n.glue[0]) || ofGlue.set(n.glue[0], []).get(n.glue[0]);
        (glues[n.glue[1]] = glues[n.glue[1]] || []).push(i);
      }
    }
  }
  function glueShown(run) { // which glue an open run draws: after its member shown, else the nearest before it
    if (!ofGlue) sortMembers();
    const glues = ofGlue.get(run) || [];
    for (let k = Math.min(shownMember.get(run) || 0, glues.length - 1); k >= 0; k--) if (glues[k]) return k;
    return glues.findIndex((g) => g);
  }
  function twin(i, hidden) { // the node drawn for node i, of a member (or glue) not shown; undefined: none
    if (!ofMember) sortMembers();
    const [from, to] = hidden.member !== undefined
      ? [ofMember.get(hidden.member), ofMember.get(shown(hidden.run)) || []]
      : [ofGlue.get(hidden.run)[hidden.glue], ofGlue.get(hidden.run)[glueShown(hidden.run)] || []];
    let lo = 0, hi = from.length - 1; // (i's place in its member: members are in graph order)
    while (lo < hi) { const mid = (lo + hi) >> 1; if (from[mid] < i) lo = mid + 1; else hi = mid; }
    return to[Math.min(lo, to.length - 1)];
  }
  // each folded run node i lies in (or is the glue of), with the index of its member there
  const repeats = new Map();
  function repeatsOf(i) {
    let found = repeats.get(i);
    if (found) return found;
    found = new Map();
    for (const p of chainOf(nodes[i].module)) if (runOf.has(p)) found.set(runOf.get(p), data.runs[runOf.get(p)].members.indexOf(p));
    if (nodes[i].glue) found.set(nodes[i].glue[0], nodes[i].glue[1]);
    repeats.set(i, found);
    return found;
  }
  // whether nodes j and i lie in different members of one run: an edge from one repeat into
  // the next is the loop the fold stands for, left out (as report.plot leaves it out)
  function acrossRepeats(j, i) {
    if (nodes[j].kind !== "op" || nodes[i].kind !== "op") return false;
    const after = repeatsOf(i);
    for (const [run, k] of repeatsOf(j)) if (after.has(run) && after.get(run) !== k) return true;
    return false;
  }

  function visible() {
    openRuns = new Set();
    const boxes = new Map(); // key -> {key, nodes: [i], order}
    const of = new Array(nodes.length), hidden = new Array(nodes.length), drawnAs = new Array(nodes.length);
    for (let i = 0; i < nodes.length; i++) {
      const key = boxOf(i);
      of[i] = typeof key === "object" ? null : key;
      hidden[i] = typeof key === "object" ? key : null;
    }
    for (let i = 0; i < nodes.length; i++) { // a node not drawn: its twin (a run in a run: the twin's twin)
      let j = i;
      for (let seen = 0; j !== undefined && hidden[j] && seen < 64; seen++) j = twin(j, hidden[j]);
      drawnAs[i] = j !== undefined && !hidden[j] ? j : null;
    }
    // the boxes in the order their nodes run, the glue an open run draws after its member
    // shown (the glue before the last member drawn after it, where report.plot draws it)
    const after = new Map();
    for (const run of openRuns) {
      const g = glueShown(run), s = shownMember.get(run) || 0, member = ofMember.get(shown(run));
      const last = member ? member[member.length - 1] : null; // (runs in a run may end on one node)
      if (g >= 0 && g < s && member) after.set(last, (after.get(last) || []).concat(ofGlue.get(run)[g]));
    }
    const moved = new Set([].concat(...after.values()));
    const put = (i) => {
      const key = of[i];
      if (key === null) return;
      let box = boxes.get(key);
      if (!box) { box = { key: key, nodes: [], order: boxes.size }; boxes.set(key, box); }
      box.nodes.push(i);
    };
    for (let i = 0; i < nodes.length; i++) {
      if (!moved.has(i)) put(i);
      if (after.has(i)) for (const j of after.get(i)) put(j);
    }
    boxes.set("out", { key: "out", nodes: [], order: boxes.size });
    const edges = connect(boxes, of, drawnAs, hidden);
    return { boxes: [...boxes.values()], edges: [...edges.values()], runs: [...openRuns] };
  }

  // the edges between boxes, each [from, to, the nodes whose outputs it carries]; per box
  // the nodes whose outputs enter it (`entering`) and the last that leaves it (`leaving`),
  // the shapes it shows, as report.plot finds them
  function connect(boxes, of, drawnAs, hidden) {
    const edges = new Map();
    const add = (a, b, j, from) => { // j: the node whose output the edge carries, from: the node drawn for it
      if (a === b) return;
      let edge = edges.get(a + "\u0000" + b);
      if (!edge) edges.set(a + "\u0000" + b, (edge = [a, b, []]));
      if (!edge[2].includes(j)) edge[2].push(j);
      const into = boxes.get(b);
      if (!into.entering.includes(j)) into.entering.push(j);
      boxes.get(a).leaving = from;
    };
    for (const box of boxes.values()) { box.entering = []; box.leaving = null; }
    for (let i = 0; i < nodes.length; i++) {
      const to = drawnAs[i], h = hidden[i];
      if (to === null) continue;
      for (const a of nodes[i].args) {
        const j = index.get(a);
        if (j === undefined || drawnAs[j] === null || acrossRepeats(j, i)) continue;
        // (inside one member not shown: the member shown draws the same edge, carrying its own)
        if (h && hidden[j] && hidden[j].run === h.run && hidden[j].member === h.member && hidden[j].glue === h.glue) continue;
        add(of[drawnAs[j]], of[to], j, drawnAs[j]);
      }
    }
    for (const a of data.output.args) if (index.has(a) && drawnAs[index.get(a)] !== null) add(of[drawnAs[index.get(a)]], "out", index.get(a), drawnAs[index.get(a)]);
    return edges;
  }
  function moduleKeys(p) { // a module's box keys: one, or one per call
    const calls = modules[p].calls;
    return calls > 1 ? Array.from({ length: calls }, (_, i) => `m:${p}@${i}`) : ["m:" + p];
  }
  return {
    index: index, runOf: runOf, transparent: transparent, chainOf: chainOf, modulePath: modulePath, callOf: callOf,
    partOf: partOf, openKey: openKey, moduleKeys: moduleKeys, shown: shown, visible: visible,
  };
}
