// fxinspect explorer: the module graph of one report, opened level by level: what is open,
// the drawing, the clicks, and the controls scripts drive. Reads the report's data from the
// page (#fxinspect-data); lays out only the boxes that are open; every module box carries
// data-path, every op box data-node (the testing contract in docs/explorer.md). Loaded
// last: its parts (format, boxes, describe, layout, colours, panel, tooltip, memory, pair,
// zoom, find, export, unpack) before it.
(function () {
  "use strict";
  const tooltip = document.getElementById("tooltip");

  // one explorer inside `root` (its parts are found by data-part), of one report's data;
  // `changes` (a diff page): per module path, how it differs in the other report
  function explorer(root, data, changes) {
  const part = (name) => root.querySelector(`[data-part="${name}"]`);
  const nodes = data.nodes;
  const modules = data.modules;
  const expanded = new Set([""]);
  const shownMember = new Map(); // an open run (by its first member) -> the index of the one member it shows
  let colourBy = "flops" in data.colour_by ? "flops" : Object.keys(data.colour_by)[0] || null;
  let selected = null;
  const graph = part("graph");
  const text = fxinspectFormat();
  const { esc } = text;
  const keys = fxinspectBoxes(data, expanded, shownMember);
  const { index, runOf, transparent, chainOf, modulePath, partOf, openKey, moduleKeys, shown, visible } = keys;
  const { describe, carries } = fxinspectDescribe(data, keys, changes, text);
  const { layout, route } = fxinspectLayout(carries);
  const colours = fxinspectColours(data, chainOf, text);
  const { colour, scale, spanValues, drawScale } = colours;
  const panels = fxinspectPanel(part, data, keys, text);
  const { place, tip } = fxinspectTooltip(tooltip, data, keys, text);
  function panel(key) { panels.panel(key, current); }

  function span(field) { return scale(pair.withOther(spanValues(field))); } // (a diff page: over both reports)

  // ---------------------------------------------------------------- drawing
  function draw() {
    const { boxes, edges, runs } = visible();
    split = new Set(boxes.filter((b) => partOf(b.key)).map((b) => openKey(b.key)));
    const infos = boxes.map((b) => describe(b, colourBy, split));
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
    part("runs").innerHTML = runs.map((run) => {
      const members = data.runs[run].members, i = members.indexOf(shown(run));
      const arrow = (delta, on) => `<button type="button" data-run="${esc(run)}" data-step="${delta}"${on ? "" : " disabled"}>${delta < 0 ? "◀" : "▶"}</button>`;
      return `<div>${esc(data.runs[run].label)}: ${arrow(-1, i > 0)} <span data-shown="${esc(members[i])}">${esc(members[i])}</span> (${i + 1} of ${members.length}) ${arrow(1, i < members.length - 1)}</div>`;
    }).join("");
    drawScale(part("scale"), norm, colourBy);
    panels.crumbs(selected);
    pair.drawn();
  }
  let current = null;
  let split = new Set(); // the calls drawn in parts (their first part's key), as describe names them
  const mini = part("minimap");
  const zoom = fxinspectZoom(graph, mini);
  function isExpandable(key) { return key.startsWith("m:") || key.startsWith("r:") || key.startsWith("s:"); }

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
  // the side panel shown or hidden: on a diff page, both panes' (the page holds the choice)
  const sides = root.closest(".diff") || root;
  function sidePressed() { for (const b of sides.querySelectorAll('[data-part="side"]')) b.setAttribute("aria-pressed", String(!sides.classList.contains("panel-closed"))); }
  part("side").addEventListener("click", () => { sides.classList.toggle("panel-closed"); sidePressed(); zoom.apply(); });
  sidePressed();
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

  const pair = fxinspectPair({
    root, part, data, keys, expanded, shownMember, zoom, choose, controls, draw, panel, within, pathOfKey, colours,
    get current() { return current; },
    get selected() { return selected; },
    set selected(key) { selected = key; },
    get colourBy() { return colourBy; },
    set colourBy(field) { colourBy = field; },
  });
  Object.assign(controls, pair.pairing());

  // the first view: the root's children, repeated blocks folded, all in sight
  draw();
  zoom.fit();
  panel(null);
  panels.table();
  fxinspectMemory(part("memory"), data, text, tooltip, place);
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
