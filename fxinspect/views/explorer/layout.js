// fxinspect explorer: where the boxes and edges go: boxes in layers by longest path, each
// layer ordered by where its boxes' inputs sit; an edge down several layers in a lane of
// its own beside the boxes it passes, its label in it. Loaded before explorer.js.
function fxinspectLayout(carries) {
  "use strict";
  const measure = document.createElement("canvas").getContext("2d");

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
  return { layout: layout, route: route };
}
