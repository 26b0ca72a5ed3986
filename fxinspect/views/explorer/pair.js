// fxinspect explorer: a diff page's two panes as one. Paired, each pane opens, steps,
// colours, zooms and pans as the other does (where the other report has the same path: one
// it lacks is named in a note), and both colour on one scale, over the boxes drawn in
// both. `host`: the explorer of this pane (its state, its drawing, its controls). Loaded
// before explorer.js.
function fxinspectPair(host) {
  "use strict";
  const { root, part, data, expanded, shownMember, zoom, choose, draw, panel, within, pathOfKey, colours } = host;
  const { index, runOf, moduleKeys } = host.keys;
  const { spanValues, scale, colour } = colours;
  const nodes = data.nodes;
  const modules = data.modules;
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
    return { expanded: [...expanded].filter((k) => k), shown: shownPaths, selected: host.selected, colourBy: host.colourBy };
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
      const before = anchor && host.current.centres.has(anchor) ? zoom.screen(host.current.centres.get(anchor)) : null;
      expanded.clear(); expanded.add("");
      for (const k of s.expanded) for (const mine of mapped(k)) expanded.add(mine);
      shownMember.clear();
      for (const member of Object.values(s.shown)) {
        const run = runOf.get(member);
        if (run !== undefined) shownMember.set(run, data.runs[run].members.indexOf(member));
        else if (!(member in modules)) missing.push(member);
      }
      if (s.colourBy === null || s.colourBy in data.colour_by) { host.colourBy = s.colourBy; choose.value = s.colourBy || ""; }
      host.selected = anchor;
      draw();
      const kept = anchor && (host.current.centres.has(anchor) ? anchor : (host.current.boxes.find((b) => within(b.key, anchor)) || {}).key);
      if (before && kept) zoom.keep(host.current.centres.get(kept), before);
      panel(host.selected);
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
        pane.pair(host.controls);
        zoom.onMove((before, after) => pane.followView(before, after));
        draw();
      },
      follow: follow,
      followView(before, after) { zoom.follow(before, after); },
      values() { return host.colourBy ? spanValues(host.colourBy) : []; }, // (the values this pane's scale spans)
      fill(v) { const norm = scale(withOther(host.controls.values())); return norm ? colour(norm.at(v))[0] : null; }, // (the fill of a box of value v)
    };
  }
  return { withOther: withOther, drawn: drawn, pairing: pairing };
}
