"""A layered drawing of a directed graph, in pure Python (no Graphviz).

The classic Sugiyama steps, kept small:

1. **Layers**: each node one layer below the lowest of its predecessors (longest path),
   over the edges that go forward in the given order (a later-to-earlier edge, which a
   folded block can make, is drawn but does not place anything).
2. **Dummies**: an edge that spans several layers gets a waypoint in each, so it can be
   routed around the boxes and take part in crossing reduction; it crosses each layer
   straight down at its waypoint and bends only in the gaps between layers, where no
   box stands, so it never passes behind a box.
3. **Order**: within each layer, sweeps down and up sort nodes by the barycentre of
   their neighbours in the layer before (after); the order with the fewest crossings
   is kept.
4. **Coordinates**: each node is pulled towards the mean position of its neighbours,
   then pushed apart so that no two boxes of a layer are closer than ``gap``; layers are
   stacked at their tallest box plus ``gap``.
5. **Edge labels** (where given): an edge carries its label in the gap below its
   source's layer, where the edges of one source that carry the same thing share one
   (a fan-out is labelled once); the gap is made tall enough, its labels set side by
   side, each as near the middle of its edges' first stretch as the others allow, and
   each edge bent through its label. (Its lane keeps the width it had: a lane widened
   for a label made a densely connected model, DenseNet's blocks, nine times wider.)

Everything is deterministic: ties break by the nodes' given order.

Example
-------
>>> pos, routes, spots = layered(["a", "b", "c"], [("a", "b"), ("a", "c"), ("b", "c")], {"a": (40, 20), "b": (40, 20), "c": (40, 20)})
>>> [pos[n][1] for n in "abc"]                 # three layers: 20 high, 24 apart
[10.0, 54.0, 98.0]
>>> routes[("a", "c")][1:3]      # straight down through b's layer, 20 right of b (0 to 40 wide)
[(60.0, 44.0), (60.0, 64.0)]
>>> boxes = {"a": (40, 20), "b": (40, 20), "c": (40, 20)}
>>> named = {("a", "b"): "x", ("a", "c"): "x", ("b", "c"): "y"}  # a's two edges carry the same
>>> pos, routes, spots = layered("abc", [("a", "b"), ("a", "c"), ("b", "c")], boxes, 24, 24, named, {"x": (30, 10), "y": (30, 10)})
>>> spots["x"][1], spots["y"][1]               # the middles of the gaps below a and b (20 high, 24 apart)
(32.0, 76.0)
>>> routes[("a", "b")][1] == routes[("a", "c")][1] == spots["x"]   # both of a's edges bend through its label
True
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

__all__ = ["layered"]

Node = Hashable
Point = tuple[float, float]
SWEEPS = 8
LABEL_GAP = 4.0  # between two labels side by side in a gap between layers
LABEL_MARGIN = 7.0  # between a label in a gap and the layers above and below it


def _layers(nodes: Sequence[Node], edges: Sequence[tuple[Node, Node]]) -> dict[Node, int]:
    rank = {n: i for i, n in enumerate(nodes)}
    layer = {n: 0 for n in nodes}
    preds: dict[Node, list[Node]] = {n: [] for n in nodes}
    for u, v in edges:
        if rank[u] < rank[v]:
            preds[v].append(u)
    for n in nodes:  # the given order is a topological order of the forward edges
        if preds[n]:
            layer[n] = max(layer[u] for u in preds[n]) + 1
    return layer


def _crossings(upper: list[Node], lower: list[Node], down: dict[Node, list[Node]]) -> int:
    position = {n: i for i, n in enumerate(lower)}
    ends = [position[v] for u in upper for v in sorted(down.get(u, ()), key=position.get) if v in position]
    # inversions of the lower ends, read in upper order, are the crossings
    count = 0
    for i, a in enumerate(ends):
        for b in ends[i + 1 :]:
            if b < a:
                count += 1
    return count


def _order(rows: list[list[Node]], down: dict[Node, list[Node]], up: dict[Node, list[Node]]) -> list[list[Node]]:
    def total(rs: list[list[Node]]) -> int:
        return sum(_crossings(a, b, down) for a, b in zip(rs, rs[1:]))

    best, best_count = [list(r) for r in rows], total(rows)
    for sweep in range(SWEEPS):
        going_down = sweep % 2 == 0
        indices = range(1, len(rows)) if going_down else range(len(rows) - 2, -1, -1)
        for i in indices:
            ref = {n: k for k, n in enumerate(rows[i - 1 if going_down else i + 1])}
            links = up if going_down else down
            current = {n: k for k, n in enumerate(rows[i])}

            def key(n: Node, ref=ref, links=links, current=current) -> tuple[float, int]:
                near = [ref[m] for m in links.get(n, ()) if m in ref]
                return (sum(near) / len(near) if near else current[n], current[n])

            rows[i] = sorted(rows[i], key=key)
        count = total(rows)
        if count < best_count:
            best, best_count = [list(r) for r in rows], count
    return best


def _place(row: list[Node], want: dict[Node, float], width: dict[Node, float], gap: float) -> dict[Node, float]:
    """x centres as close to ``want`` as the order and the gaps allow (left and right pass, averaged)."""
    left: dict[Node, float] = {}
    edge = float("-inf")
    for n in row:
        x = max(want[n], edge + width[n] / 2)
        left[n] = x
        edge = x + width[n] / 2 + gap
    right: dict[Node, float] = {}
    edge = float("inf")
    for n in reversed(row):
        x = min(want[n], edge - width[n] / 2)
        right[n] = x
        edge = x - width[n] / 2 - gap
    xs = {n: (left[n] + right[n]) / 2 for n in row}
    edge = float("-inf")  # the average of two feasible placements can still touch: settle left to right
    for n in row:
        xs[n] = max(xs[n], edge + width[n] / 2)
        edge = xs[n] + width[n] / 2 + gap
    return xs


def layered(
    nodes: Sequence[Node],
    edges: Sequence[tuple[Node, Node]],
    sizes: dict[Node, tuple[float, float]],
    gap: float = 20.0,
    layer_gap: float | None = None,
    labels: dict[tuple[Node, Node], Hashable] | None = None,
    label_sizes: dict[Hashable, tuple[float, float]] | None = None,
) -> tuple[dict[Node, Point], dict[tuple[Node, Node], list[Point]], dict[Hashable, Point]]:
    """Centres of ``nodes`` (top to bottom, y growing downwards), a route per edge, and
    the centre of each edge label.

    ``sizes`` are ``(width, height)``; ``nodes`` in an order that puts producers first
    (execution order). A route runs from the source's centre through its waypoints to
    the target's centre. ``labels`` names the label of each edge that has one (edges of
    one source may share one; an edge back up or within a layer gets none), and
    ``label_sizes`` gives each label's ``(width, height)``.
    """
    labels, label_sizes = labels or {}, label_sizes or {}
    layer = _layers(nodes, edges)
    rows: list[list[Node]] = [[] for _ in range(max(layer.values(), default=0) + 1)]
    for n in nodes:
        rows[layer[n]].append(n)
    down: dict[Node, list[Node]] = {}
    up: dict[Node, list[Node]] = {}
    chains: dict[tuple[Node, Node], list[Node]] = {}
    width = {n: sizes[n][0] for n in nodes}
    for u, v in edges:
        a, b = layer[u], layer[v]
        chain = [u]
        for k in range(a + 1, b):  # a waypoint in every layer the edge crosses
            dummy = ("·", u, v, k)
            rows[k].append(dummy)
            width[dummy] = 0.0
            chain.append(dummy)
        chain.append(v)
        chains[(u, v)] = chain
        if a < b:  # (an edge back up, or within a layer, is drawn but orders nothing)
            for s, t in zip(chain, chain[1:]):
                down.setdefault(s, []).append(t)
                up.setdefault(t, []).append(s)
    rows = _order(rows, down, up)

    xs: dict[Node, float] = {}
    for row in rows:  # start packed, then relax towards the neighbours' mean
        xs.update(_place(row, {n: 0.0 for n in row}, width, gap))
    for sweep in range(SWEEPS):
        for i in range(len(rows)) if sweep % 2 == 0 else range(len(rows) - 1, -1, -1):
            want = {}
            for n in rows[i]:
                near = [xs[m] for m in (*up.get(n, ()), *down.get(n, ())) if m in xs]
                want[n] = sum(near) / len(near) if near else xs[n]
            xs.update(_place(rows[i], want, width, gap))
    labelled = {e: key for e, key in labels.items() if e in chains and layer[e[0]] < layer[e[1]]}
    in_gap = _gap_labels(labelled, chains, layer, xs, label_sizes)
    shift = min(
        [xs[n] - width[n] / 2 for row in rows for n in row]
        + [x - label_sizes[key][0] / 2 for placed in in_gap.values() for key, x in placed.items()]
    )

    heights = [max((sizes[n][1] for n in row if n in sizes), default=0.0) for row in rows]
    layer_gap = gap * 1.2 if layer_gap is None else layer_gap
    gaps = [
        max([layer_gap] + [label_sizes[key][1] + 2 * LABEL_MARGIN for key in in_gap.get(k, ())])
        for k in range(len(rows))
    ]
    ys, y = [], 0.0
    for h, below in zip(heights, gaps):
        ys.append(y + h / 2)
        y += h + below
    pos = {n: (xs[n] - shift, ys[k]) for k, row in enumerate(rows) for n in row}
    spots = {
        key: (x - shift, ys[k] + heights[k] / 2 + gaps[k] / 2)
        for k, placed in in_gap.items()
        for key, x in placed.items()
    }
    top = [y - h / 2 for y, h in zip(ys, heights)]
    bottom = [y + h / 2 for y, h in zip(ys, heights)]
    routes = {}
    for (u, v), chain in chains.items():
        if layer[u] >= layer[v]:  # an edge back up or within a layer: straight, drawn aside by the caller
            routes[(u, v)] = [pos[n] for n in chain]
            continue
        # Down the layers, it crosses a layer only straight down (from its source's foot to the
        # layer's, through each waypoint's layer, from the layer's top to its target's head) and
        # bends only in the gaps between layers, where no box stands: so it never passes behind one.
        (xu, yu), (xv, yv) = pos[u], pos[v]
        route = [pos[u]] + ([(xu, bottom[layer[u]])] if yu + sizes[u][1] / 2 < bottom[layer[u]] else [])
        if (u, v) in labelled:  # bent through its label, in the gap below its source's layer
            route.append(spots[labelled[(u, v)]])
        for dummy in chain[1:-1]:
            x, k = pos[dummy][0], dummy[3]  # (its layer)
            route += [(x, top[k]), (x, bottom[k])]
        route += [(xv, top[layer[v]])] if yv - sizes[v][1] / 2 > top[layer[v]] else []
        routes[(u, v)] = [*route, pos[v]]
    return {n: pos[n] for n in nodes}, routes, spots


def _gap_labels(
    labelled: dict[tuple[Node, Node], Hashable],
    chains: dict[tuple[Node, Node], list[Node]],
    layer: dict[Node, int],
    xs: dict[Node, float],
    label_sizes: dict[Hashable, tuple[float, float]],
) -> dict[int, dict[Hashable, float]]:
    """Per gap (by the layer above it), the x centre of each label in it: side by side,
    each as near the middle of its edges' first stretches as the others allow."""
    middles: dict[Hashable, list[float]] = {}
    gap_of: dict[Hashable, int] = {}
    for (u, v), key in labelled.items():
        middles.setdefault(key, []).append((xs[u] + xs[chains[(u, v)][1]]) / 2)
        gap_of[key] = layer[u]
    found: dict[int, list[Hashable]] = {}
    for key in middles:
        found.setdefault(gap_of[key], []).append(key)
    placed = {}
    for k, row in found.items():
        want = {key: sum(middles[key]) / len(middles[key]) for key in row}
        row = sorted(row, key=want.__getitem__)  # (stable: ties keep the edges' order)
        placed[k] = _place(row, want, {key: label_sizes[key][0] for key in row}, LABEL_GAP)
    return placed
