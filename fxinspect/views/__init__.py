"""Views of a report: pure functions of a ``Report`` that return text or objects.

Nothing here changes a report or any library's global settings. ``Report`` methods
(``report.table()``, ``print(report)``, ``report.to_json()``, ...) call these.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 10))
>>> report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
>>> from fxinspect.views import table
>>> print(table(report, by="op", sort="flops", top=2, columns=["op", "flops", "macs"]))
op        FLOPs     MACs
------  -------  -------
Conv2d  15.84 K   7.78 K
Linear   5.77 K   2.88 K
------  -------  -------
total   21.90 K  10.66 K
2 of 3 rows shown
1 op type that cost nothing (no FLOPs, no bytes) not shown: zeros=True
"""

from .columns import By, Column, columns_for
from .exports import from_json, report_to_dict, to_csv, to_dataframe, to_json
from .summary import summary
from .table import table

__all__ = [
    "By",
    "Column",
    "columns_for",
    "from_json",
    "report_to_dict",
    "summary",
    "table",
    "to_csv",
    "to_dataframe",
    "to_json",
]
