// fxinspect explorer: zoom, pan and fit of one graph, an <svg> whose drawing sits in its
// <g class="view">. The wheel (and a trackpad's pinch, which arrives as a wheel with
// ctrlKey) zooms about the pointer, a drag pans, two fingers pinch; a click that ends a
// drag is swallowed, so panning never opens a box. Loaded before explorer.js.
function fxinspectZoom(svg, minimap) {
  "use strict";
  const view = { k: 1, x: 0, y: 0 }; // screen = drawing * k + (x, y), in the svg's pixels
  let extent = { w: 1, h: 1 }; // the drawing's size
  const clamp = (k) => Math.max(1e-3, Math.min(8, k));
  const size = () => { const r = svg.getBoundingClientRect(); return [r.width, r.height]; };
  const at = (e) => { const r = svg.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  // (a diff page: told of each move the hand makes here, the other pane makes the same)
  let follower = null, following = false;
  const viewNow = () => ({ k: view.k, x: view.x, y: view.y });
  function tell(before) { if (follower && !following) follower(before, viewNow()); }

  function apply() {
    const g = svg.querySelector("g.view");
    if (g) g.setAttribute("transform", `translate(${view.x.toFixed(1)},${view.y.toFixed(1)}) scale(${Number(view.k.toFixed(5))})`);
    if (minimap) { // the part of the drawing in sight, framed on the minimap
      const [W, H] = size(), frame = minimap.querySelector(".sight");
      if (frame) {
        frame.setAttribute("x", -view.x / view.k); frame.setAttribute("y", -view.y / view.k);
        frame.setAttribute("width", W / view.k); frame.setAttribute("height", H / view.k);
      }
    }
  }
  function zoomAt([px, py], f) { // the drawing's point under (px, py) stays there
    const k = clamp(view.k * f);
    view.x = px - ((px - view.x) * k) / view.k;
    view.y = py - ((py - view.y) * k) / view.k;
    view.k = k;
    apply();
  }
  function fit() { // all of the drawing in sight, centred, never magnified
    const [W, H] = size();
    view.k = clamp(Math.min(1, (W - 24) / extent.w, (H - 24) / extent.h));
    view.x = (W - extent.w * view.k) / 2;
    view.y = (H - extent.h * view.k) / 2;
    apply();
    tell(null);
  }
  function centre([gx, gy], k) { // the drawing's point (gx, gy) in the middle, at scale k when given
    const [W, H] = size();
    if (k) view.k = clamp(k);
    view.x = W / 2 - gx * view.k;
    view.y = H / 2 - gy * view.k;
    apply();
  }
  function keep([gx, gy], [sx, sy]) { view.x = sx - gx * view.k; view.y = sy - gy * view.k; apply(); }
  function screen([gx, gy]) { return [gx * view.k + view.x, gy * view.k + view.y]; }

  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const lines = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1; // (a wheel may count lines or pages)
    const before = viewNow();
    zoomAt(at(e), Math.exp(-e.deltaY * lines * (e.ctrlKey ? 0.01 : 0.002)));
    tell(before);
  }, { passive: false });

  // drag to pan (one pointer), pinch to zoom (two)
  const pointers = new Map();
  let moved = 0, dragged = false, spread = null;
  const pinch = () => {
    const [[ax, ay], [bx, by]] = [...pointers.values()];
    return { d: Math.hypot(ax - bx, ay - by) || 1, c: [(ax + bx) / 2, (ay + by) / 2] };
  };
  svg.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    pointers.set(e.pointerId, at(e));
    moved = 0; dragged = false;
    spread = pointers.size === 2 ? pinch() : null;
  });
  window.addEventListener("pointermove", (e) => {
    const was = pointers.get(e.pointerId);
    if (!was) return;
    const now = at(e), before = viewNow();
    pointers.set(e.pointerId, now);
    if (pointers.size === 2 && spread) {
      const next = pinch();
      view.x += next.c[0] - spread.c[0]; view.y += next.c[1] - spread.c[1];
      zoomAt(next.c, next.d / spread.d);
      spread = next; dragged = true;
      tell(before);
      return;
    }
    moved += Math.abs(now[0] - was[0]) + Math.abs(now[1] - was[1]);
    if (moved > 4) { // (a hand's tremor in a click is not a drag)
      dragged = true;
      svg.classList.add("panning");
      view.x += now[0] - was[0]; view.y += now[1] - was[1];
      apply();
      tell(before);
    }
  });
  const release = (e) => { pointers.delete(e.pointerId); spread = null; svg.classList.remove("panning"); };
  window.addEventListener("pointerup", release);
  window.addEventListener("pointercancel", release);
  svg.addEventListener("click", (e) => { if (dragged) { dragged = false; e.stopImmediatePropagation(); } }, true);

  if (minimap) { // a click or drag on the minimap brings that part of the drawing to the middle
    const go = (e) => {
      const r = minimap.getBoundingClientRect(), vb = minimap.viewBox.baseVal;
      const s = Math.max(vb.width / r.width, vb.height / r.height); // (the minimap keeps the drawing's aspect)
      const before = viewNow();
      centre([vb.x + (e.clientX - r.left - (r.width - vb.width / s) / 2) * s, vb.y + (e.clientY - r.top - (r.height - vb.height / s) / 2) * s]);
      tell(before);
    };
    minimap.addEventListener("pointerdown", (e) => { go(e); minimap.onpointermove = (m) => { if (m.buttons) go(m); }; });
  }

  return {
    view: view,
    fit: fit,
    centre: centre,
    keep: keep,
    screen: screen,
    zoomAt: zoomAt,
    apply: apply,
    setExtent(w, h) { extent = { w: w, h: h }; },
    onMove(f) { follower = f; }, // f(before, after): a view moved by hand (before null: a fit)
    follow(before, after) { // the move another pane made: the same zoom about the same point, the same pan; a fit, a fit
      following = true;
      try {
        if (!before) { fit(); return; }
        const r = after.k / before.k;
        view.k *= r; view.x = view.x * r + after.x - before.x * r; view.y = view.y * r + after.y - before.y * r;
        apply();
      } finally { following = false; }
    },
  };
}
