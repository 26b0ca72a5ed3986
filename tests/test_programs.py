"""The two ways a captured graph runs: interpreted once (counting) and compiled (timing)."""

from __future__ import annotations

import weakref

import pytest
import torch

from fxinspect.capture import capture
from fxinspect.run.codegen import compile_graph
from fxinspect.run.graphs import op_nodes
from fxinspect.run.interpret import Interpreted


class Mixed(torch.nn.Module):
    """Nodes in lists, dicts, slices and keyword arguments; a value used late; a
    node whose value nobody reads; nested outputs."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.register_buffer("shift", torch.ones(8))

    def forward(self, x, extra):
        y = self.fc(x) + self.shift
        n = x.shape[1] // 2
        parts = torch.split(y, [n, n], dim=-1)
        z = torch.cat([parts[1], parts[0]], dim=-1)
        z = z[:, 1 : n + 2]
        torch.relu(z)  # never read
        w = torch.nn.functional.pad(z, (0, 1), value=0.5) * extra["w"].sum()
        return {"z": w, "pair": (y, extra["w"].view(-1, 2))}


def _captures():
    model, inputs = Mixed(), (torch.randn(2, 8), {"w": torch.randn(4)})
    for method in ("symbolic", "export", "eager"):
        yield method, model, capture(model, inputs, {}, method=method)


@pytest.mark.parametrize("method, model, cap", list(_captures()), ids=lambda v: v if isinstance(v, str) else "")
def test_interpreted_and_compiled_programs_compute_what_the_graph_computes(method, model, cap):
    tensors = cap.inputs.tensors
    expected = cap.graph_module(*tensors)
    calls = []

    def wrap(i, fn):
        def probe(*args, **kwargs):
            calls.append(i)
            return fn(*args, **kwargs)

        return probe

    interpreted = Interpreted(cap.graph_module, lambda i, fn, args, kwargs: wrap(i, fn)(*args, **kwargs))(*tensors)
    stamps = []
    compiled = compile_graph(cap.graph_module, stamp=lambda: stamps.append(len(stamps)))(*tensors)
    n_ops = len(op_nodes(cap.graph_module.graph))
    assert calls == list(range(n_ops))  # every op node once, in graph order
    assert len(stamps) == n_ops + 1  # a clock before the first op node and after each
    for got in (interpreted, compiled):
        assert len(got) == len(expected)
        assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_interpreted_program_frees_each_value_after_its_last_use():
    cap = capture(Mixed(), (torch.randn(2, 8), {"w": torch.randn(4)}), {}, method="symbolic")
    graph_ops = op_nodes(cap.graph_module.graph)
    last_use = {}
    for i, node in enumerate(graph_ops):
        for used in node.all_input_nodes:
            if used in graph_ops:
                last_use[graph_ops.index(used)] = i
    refs: dict[int, weakref.ref] = {}
    alive_too_long = []

    def wrap(i, fn):
        def probe(*args, **kwargs):
            live = [t for t in (r() for r in refs.values()) if t is not None]
            bases = {id(t._base) for t in live if t._base is not None}  # a view keeps its base
            for j, ref in refs.items():  # values whose last reader ran before node i
                t = ref()
                if t is not None and last_use.get(j, j) < i and not _is_output(j) and id(t) not in bases:
                    alive_too_long.append((graph_ops[j].name, graph_ops[i].name))
            out = fn(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                refs[i] = weakref.ref(out)
            return out

        return probe

    output_names = {n.name for n in cap.graph_module.graph.find_nodes(op="output")[0].all_input_nodes}

    def _is_output(j: int) -> bool:
        return graph_ops[j].name in output_names

    with torch.no_grad():  # (autograd would keep saved operands alive, rightly)
        Interpreted(cap.graph_module, lambda i, fn, args, kwargs: wrap(i, fn)(*args, **kwargs))(*cap.inputs.tensors)
    assert len(refs) > 5 and alive_too_long == []


def test_arguments_are_rebuilt_with_node_values_in_plain_containers():
    import collections

    import torch.fx as fx
    from torch.fx.immutable_collections import immutable_dict, immutable_list

    from fxinspect.run.interpret import _value

    Pair = collections.namedtuple("Pair", "a b")
    x = fx.Graph().placeholder("x")
    env = {x: 5}
    got = _value(immutable_list([x, immutable_dict({"k": (x, slice(x, None))}), Pair(x, 2), torch.Size([4, 3])]), env)
    assert got == [5, {"k": (5, slice(5, None, None))}, Pair(5, 2), torch.Size([4, 3])]
    assert type(got) is list and type(got[1]) is dict and type(got[2]) is Pair and type(got[3]) is torch.Size
