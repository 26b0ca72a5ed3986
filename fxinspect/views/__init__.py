"""Views of a report: pure functions of a ``Report`` that return text or objects.

Nothing here changes a report or any library's global settings. ``Report`` methods
(``report.table()``, ``print(report)``, ``report.to_json()``, ...) call these.

Example
-------
>>> from fxinspect.views import table, summary                      # doctest: +SKIP
>>> print(table(report, by="op", sort="flops", top=5))            # doctest: +SKIP
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
