// fxinspect explorer: the tooltip: a box's figures as the table writes them, placed
// beside the pointer and inside the window. Loaded before explorer.js.
function fxinspectTooltip(tooltip, data, keys, text) {
  "use strict";
  const nodes = data.nodes;
  const modules = data.modules;
  const { modulePath } = keys;
  const { format, esc } = text;

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
  return { place: place, tip: tip };
}
