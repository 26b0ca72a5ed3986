// fxinspect watch page: per module, a heat map per quantity over the logged steps.
// Each panel is a canvas drawn when it first scrolls into view; hovering a cell shows
// its step, bin and count. Panels carry data-module, data-quantity and data-steps.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("fxinspect-data").textContent);
  const tooltip = document.getElementById("tooltip");
  const CELL_W = 14, CELL_H = 7, LABELS = 56;
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const anchor = (name) => "m-" + encodeURIComponent(name || "(model)");

  document.getElementById("about").textContent =
    `${data.modules.length} modules, logged every ${data.every} steps`;
  const findings = document.getElementById("findings");
  findings.innerHTML = data.findings.length
    ? "<h2>Findings</h2><ul>" + data.findings.map((f) =>
      `<li>${f.module !== null ? `<a href="#${anchor(f.module)}">${esc(f.text)}</a>` : esc(f.text)}</li>`).join("") + "</ul>"
    : "<p>nothing unusual in the logged steps</p>";

  const section = document.getElementById("modules");
  section.innerHTML = data.modules.map((m, i) =>
    `<div class="module" id="${anchor(m.name)}"><h3>${esc(m.name || "(model)")} <small>${esc(m.type)}</small></h3>` +
    m.panels.map((p, j) =>
      `<figure class="panel" data-module="${esc(m.name)}" data-quantity="${esc(p.quantity)}" data-steps="${p.steps.join(",")}">` +
      `<figcaption>${esc(p.title)}</figcaption><canvas data-at="${i},${j}" width="${LABELS + CELL_W * p.steps.length}" height="${CELL_H * p.bins.length + 14}"></canvas></figure>`
    ).join("") + "</div>").join("");

  function draw(canvas) {
    const [i, j] = canvas.dataset.at.split(",").map(Number);
    const p = data.modules[i].panels[j];
    const ctx = canvas.getContext("2d");
    let top = 0;
    for (const row of p.counts) for (const c of row) top = Math.max(top, c);
    const scale = Math.log10(1 + top) || 1;
    p.counts.forEach((row, r) => row.forEach((c, s) => {
      // magma-like: white for nothing, through orange to black for the most
      const t = Math.log10(1 + c) / scale;
      const shade = c ? `hsl(${30 - 30 * t}, 90%, ${88 - 80 * t}%)` : "#ffffff";
      ctx.fillStyle = shade;
      ctx.fillRect(LABELS + s * CELL_W, r * CELL_H, CELL_W - 1, CELL_H);
    }));
    ctx.fillStyle = "#333";
    ctx.font = "9px sans-serif";
    // bins named where there is room: NaN, 0 and -Inf first, then every few, 10 px apart
    const placed = [];
    const room = (r) => placed.every((q) => Math.abs(q - r) * CELL_H >= 10);
    const every = Math.max(1, Math.ceil(p.bins.length / 12));
    const order = p.bins.map((label, r) => r).sort((a, b) => rank(p.bins[a], a) - rank(p.bins[b], b));
    function rank(label, r) { return ["NaN", "0", "-Inf"].includes(label) ? -1 : r % every === 0 ? r : 1e9; }
    for (const r of order) if (rank(p.bins[r], r) < 1e9 && room(r)) { placed.push(r); ctx.fillText(p.bins[r], 0, r * CELL_H + CELL_H); }
    const stepEvery = Math.max(1, Math.ceil(p.steps.length / 8));
    p.steps.forEach((step, s) => { if (s % stepEvery === 0) ctx.fillText(String(step), LABELS + s * CELL_W, CELL_H * p.bins.length + 12); });
    canvas.dataset.drawn = "true";
  }
  const seen = new IntersectionObserver((entries) => {
    for (const e of entries) if (e.isIntersecting && !e.target.dataset.drawn) { draw(e.target); seen.unobserve(e.target); }
  });
  section.querySelectorAll("canvas").forEach((c) => seen.observe(c));

  section.addEventListener("mousemove", (e) => {
    const canvas = e.target.closest("canvas");
    if (!canvas) { tooltip.hidden = true; return; }
    const [i, j] = canvas.dataset.at.split(",").map(Number);
    const p = data.modules[i].panels[j];
    const box = canvas.getBoundingClientRect();
    const s = Math.floor((e.clientX - box.left - LABELS) / CELL_W), r = Math.floor((e.clientY - box.top) / CELL_H);
    if (s < 0 || s >= p.steps.length || r < 0 || r >= p.bins.length) { tooltip.hidden = true; return; }
    tooltip.innerHTML = `<b>${esc(data.modules[i].name || "(model)")} · ${esc(p.title)}</b><table>` +
      `<tr><th>step</th><td>${p.steps[s]}</td></tr><tr><th>bin</th><td>${esc(p.bins[r])}</td></tr>` +
      `<tr><th>values</th><td>${p.counts[r][s]}</td></tr></table>`;
    tooltip.hidden = false;
    tooltip.style.left = e.pageX + 14 + "px";
    tooltip.style.top = e.pageY + 14 + "px";
  });
  section.addEventListener("mouseleave", () => { tooltip.hidden = true; });

  window.fxinspect = { drawAll() { section.querySelectorAll("canvas").forEach((c) => { if (!c.dataset.drawn) draw(c); }); } };
  window.fxinspectReadyAt = performance.now();
  window.fxinspectReady = true;
})();
