// fxinspect explorer: the memory timeline under the graph (the bytes held after each
// aten op, a step line), hovering a point names the node running there. Loaded before
// explorer.js.
function fxinspectMemory(chart, data, text, tooltip, place) {
  "use strict";
  const svgNS = "http://www.w3.org/2000/svg";
  const { format, esc } = text;
  const m = data.memory;
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
