// fxinspect explorer: the boxes' colours: one scale per figure for the whole report, from
// its smallest op to its largest box (log when they are far apart), and its colour bar.
// Loaded before explorer.js.
function fxinspectColours(data, chainOf, text) {
  "use strict";
  const nodes = data.nodes;
  const { format, esc, trim } = text;
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

  // the colour bar of figure `colourBy` in element `bar`, its marks on scale `norm`
  function drawScale(bar, norm, colourBy) {
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
  return { colour: colour, scale: scale, spanValues: spanValues, drawScale: drawScale };
}
