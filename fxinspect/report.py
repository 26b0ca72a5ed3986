"""``Report``: the analysis record with its views as methods (the facade on top).

:class:`~fxinspect.records.ReportRecord` holds the figures; this class adds tables,
graphs and exports, each a pure function in :mod:`fxinspect.views` or
:mod:`fxinspect.graph` that reads only the records. Views never import this module,
so the package has no import circle.

Example
-------
>>> import torch, fxinspect
>>> r = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()),
...                       torch.randn(2, 8), timing=False)
>>> r.modules["0"].macs            # 2 * 8 * 4
64
>>> [n.label for n in r.nodes if n.is_op]
['Linear', 'ReLU']
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .graph import to_networkx
from .records import ReportRecord
from .views import exports
from .views.breakdown import plot_breakdown as _plot_breakdown
from .views.communication import communication_table as _communication_table
from .views.diagram import plot as _plot
from .views.diff import diff as _diff
from .views.explorer import to_html as _to_html
from .views.memory_plot import plot_memory as _plot_memory
from .views.roofline import plot_roofline as _plot_roofline
from .views.roofline import roofline as _roofline
from .views.summary import summary as _summary
from .views.table import table as _table

__all__ = ["Report"]


def _shows(view: Callable, *positional: str) -> Callable[[Callable], Callable]:
    """The method's ``help()`` shows ``view``'s parameters (``positional`` ones as the
    method takes them, the others keyword-only) and its docstring after the method's."""

    def decorate(method: Callable) -> Callable:
        first, *rest = inspect.signature(view).parameters.values()
        params = [first.replace(name="self", annotation=inspect.Parameter.empty)]
        for kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            params += [p.replace(kind=kind) for p in rest if (p.name in positional) == (kind != p.KEYWORD_ONLY)]
        method.__signature__ = inspect.signature(view).replace(parameters=params)
        method.__doc__ = f"{method.__doc__}\n\n{inspect.getdoc(view)}"
        return method

    return decorate


class Report(ReportRecord):
    """Everything ``fxinspect.analyze`` measured, immutable, in base units, with views.

    ``nodes`` are in graph order; ``modules`` maps a dotted path to its record (``""``
    is the root) in the model's ``named_modules`` order.
    """

    __slots__ = ()

    @_shows(_table, "by")
    def table(self, by: str = "module", **options: Any) -> str:
        """A text table of modules, ops or nodes; see ``fxinspect.views.table.table``."""
        return _table(self, by=by, **options)

    def communication_table(self, by: str = "module", tablefmt: str = "simple") -> str:
        """A parallel step's collectives (``analyze(..., parallel=...)``) by module or by
        call; see ``fxinspect.views.communication``."""
        if self.communication is None:
            raise ValueError("this report is of a step on one device: analyse with parallel= for its communication")
        return _communication_table(self.communication, by=by, tablefmt=tablefmt)

    def summary(self, width: int | None = 100) -> str:
        """Totals, capture method, uncounted ops and non-finite findings, as text
        wrapped to ``width`` characters (``None``: lines as long as they come)."""
        return _summary(self, width)

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        """Jupyter's view: the summary, the explorer inline (``to_html``'s page in an
        ``<iframe srcdoc>``: its styles and script stay out of the notebook's, and it needs
        no server), then the module table (depth 2) as an HTML table, which a viewer that
        strips frames and scripts (a notebook rendered on a code host) still shows."""
        import html

        table, _, notes = _table(self, by="module", depth=2, tablefmt="html").partition("</table>")
        footnotes = "".join(f"<p>{html.escape(line)}</p>" for line in notes.splitlines() if line.strip())
        frame = (
            f'<iframe srcdoc="{html.escape(_to_html(self), quote=True)}" title="fxinspect explorer"'
            ' style="width:100%;height:720px;border:1px solid #ccc"></iframe>'
        )
        return f"<pre>{html.escape(self.summary())}</pre>{frame}{table}</table>{footnotes}"

    @_shows(_plot, "path")
    def plot(self, path: Any = None, **options: Any):
        """The dataflow diagram: a matplotlib Figure, or with ``path`` a PNG, SVG or PDF
        file (and ``None``); see ``fxinspect.views.diagram.plot``."""
        return _plot(self, path, **options)

    @_shows(_plot_breakdown, "metric", "path")
    def plot_breakdown(self, metric: str = "flops", path: Any = None, **options: Any):
        """Where ``metric`` goes, by module or op type, as bars; see ``fxinspect.views.breakdown``."""
        return _plot_breakdown(self, metric, path, **options)

    @_shows(_plot_memory, "path")
    def plot_memory(self, path: Any = None, **options: Any):
        """The memory timeline as a matplotlib Figure; see ``fxinspect.views.memory_plot``."""
        return _plot_memory(self, path, **options)

    def roofline(self) -> list[dict[str, Any]]:
        """Each op node against the device's roofs (needs ``device_spec=``); see
        ``fxinspect.views.roofline``."""
        return _roofline(self)

    @_shows(_plot_roofline, "path")
    def plot_roofline(self, path: Any = None, **options: Any):
        """The roofs and every op or module on them, as a matplotlib Figure; see
        ``fxinspect.views.roofline``."""
        return _plot_roofline(self, path, **options)

    def to_html(self, path: Any = None) -> str:
        """The explorer: one self-contained HTML page to browse the report (modules open
        in place, colours, tooltips, search, the module table); also written to ``path``.
        See ``fxinspect.views.explorer``."""
        return _to_html(self, path)

    def to_networkx(self, by: str = "node", depth: int | None = None, fold: bool = True, *, level: str | None = None):
        """The dataflow graph as a ``networkx.DiGraph``: per node, per module, or the
        boxes ``plot`` draws (``by="diagram"``; ``level=`` is its deprecated name); see
        ``fxinspect.graph``."""
        return to_networkx(self, by, depth, fold, level=level)

    def diff(self, other: ReportRecord):
        """Per-module differences from this report to ``other``; see ``fxinspect.views.diff``."""
        return _diff(self, other)

    def to_dict(self) -> dict[str, Any]:
        """The report as nested plain dicts and lists (what ``to_json`` writes)."""
        return exports.report_to_dict(self)

    def to_json(self, path: Any = None, layout: str = "flat") -> str:
        """The report as JSON text, also written to ``path`` when given; ``layout="nested"``
        writes the module tree (model -> fields + children) instead of the flat record."""
        return exports.to_json(self, path, layout=layout)

    @classmethod
    def from_json(cls, source: Any) -> Report:
        """Read a report written by ``to_json`` from a path or a JSON string."""
        return exports.from_json(source, cls)

    def to_dataframe(self, by: str = "node"):
        """Nodes or modules as a pandas DataFrame (needs the ``pandas`` extra)."""
        return exports.to_dataframe(self, by=by)

    def to_csv(self, path: Any = None, by: str = "node") -> str:
        """Nodes or modules as CSV text, also written to ``path`` when given."""
        return exports.to_csv(self, path, by=by)
