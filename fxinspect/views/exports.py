"""Reports as JSON (round-trip exact), pandas DataFrames and CSV.

JSON is written by one generic converter between dataclasses and plain dicts, driven
by ``dataclasses.fields`` and the records' type hints, so a new field in
:mod:`fxinspect.records` needs no change here. Non-finite floats are written as the
strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (strict JSON, readable by any
parser) and read back as floats because the type hint says ``float``.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 10))
>>> report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
>>> text = to_json(report)
>>> fxinspect.Report.from_json(text) == report
True
"""

from __future__ import annotations

import collections.abc
import csv
import dataclasses
import io
import json
import math
import os
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, Union

from ..optional import pandas
from ..records import SCHEMA_VERSION, NodeRecord, ReportRecord
from .columns import By

__all__ = ["from_json", "module_tree", "report_to_dict", "to_csv", "to_dataframe", "to_json", "to_plain"]

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}

_Report = TypeVar("_Report", bound=ReportRecord)


# ------------------------------------------------------------------ dataclass -> plain


def to_plain(obj: Any) -> Any:
    """``obj`` as JSON-ready values: dataclasses and mappings as dicts, tuples as lists.

    >>> from fxinspect.records import TensorMeta
    >>> to_plain(TensorMeta((2, 3), "torch.float32", "cpu", 24))
    {'shape': [2, 3], 'dtype': 'torch.float32', 'device': 'cpu', 'nbytes': 24, 'stats': None}
    >>> to_plain(float("nan"))
    'NaN'
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj) if not _omitted(obj, f)}
    if isinstance(obj, collections.abc.Mapping):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    return obj


def _omitted(obj: Any, f: dataclasses.Field) -> bool:
    """A field left out while ``None`` (a record's registered figures, when there are none),
    or while empty where it says so (an uncalibrated spec's efficiencies: its JSON as before)."""
    value = getattr(obj, f.name)
    return (f.metadata.get("omit_none", False) and value is None) or (f.metadata.get("omit_empty", False) and not value)


# ------------------------------------------------------------------ plain -> dataclass


class _Restorer:
    """Rebuilds typed values from plain ones, one type hint at a time.

    Holds the resolved type hints of each record class for one ``from_json`` call (a
    report has thousands of records of a dozen classes; resolving string annotations
    is the slow part), and forgets them afterwards: no module-level cache.
    """

    def __init__(self) -> None:
        self._hints: dict[type, dict[str, Any]] = {}

    def __call__(self, tp: Any, data: Any, where: str) -> Any:
        if tp is Any:
            return data
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (Union, types.UnionType):
            return self._union(args, data, where)
        if dataclasses.is_dataclass(tp):
            return self._dataclass(tp, data, where)
        if origin is tuple:
            self._expect(data, list, where)
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(self(args[0], v, f"{where}[{i}]") for i, v in enumerate(data))
            if len(args) != len(data):
                raise ValueError(f"{where}: expected {len(args)} items, got {len(data)}")
            return tuple(self(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
        if origin in (list, collections.abc.Sequence):
            self._expect(data, list, where)
            return [self(args[0], v, f"{where}[{i}]") for i, v in enumerate(data)]
        if origin in (dict, collections.abc.Mapping):
            self._expect(data, dict, where)
            return {self(args[0], k, where): self(args[1], v, f"{where}[{k!r}]") for k, v in data.items()}
        if tp is float:
            if isinstance(data, str) and data in _NONFINITE:
                return _NONFINITE[data]
            if isinstance(data, bool) or not isinstance(data, (int, float)):
                raise TypeError(f"{where}: expected a number, got {data!r}")
            return float(data)
        if tp is int:
            if isinstance(data, bool) or not isinstance(data, int):
                raise TypeError(f"{where}: expected an integer, got {data!r}")
            return data
        if tp in (str, bool):
            self._expect(data, tp, where)
            return data
        if isinstance(tp, type) and issubclass(tp, Enum):
            return tp(data)
        raise TypeError(f"{where}: cannot restore a value of type {tp!r}")

    @staticmethod
    def _expect(data: Any, kind: type, where: str) -> None:
        if not isinstance(data, kind):
            raise TypeError(f"{where}: expected {kind.__name__}, got {type(data).__name__} {data!r:.60}")

    def _union(self, args: tuple, data: Any, where: str) -> Any:
        if data is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:  # ``X | None`` has one; try each of a wider union in turn
            try:
                return self(option, data, where)
            except (TypeError, ValueError) as exc:
                errors.append(exc)
        raise errors[-1]

    def _dataclass(self, cls: type, data: Any, where: str) -> Any:
        self._expect(data, dict, where)
        if cls not in self._hints:
            self._hints[cls] = typing.get_type_hints(cls)
        hints = self._hints[cls]
        init = [f for f in dataclasses.fields(cls) if f.init]
        unknown = set(data) - {f.name for f in init}
        if unknown:
            raise ValueError(f"{where}: {cls.__name__} has no fields {sorted(unknown)}")
        return cls(**{f.name: self(hints[f.name], data[f.name], f"{where}.{f.name}") for f in init if f.name in data})


def report_to_dict(report: ReportRecord) -> dict[str, Any]:
    """The report as nested plain dicts and lists (what ``to_json`` writes)."""
    return to_plain(report)


def module_tree(report: ReportRecord) -> dict[str, Any]:
    """The modules as one nested dict: each module's record fields, then ``children``
    (the layout torch_inspector's users know). For reading; ``from_json`` reads the flat
    layout only.

    >>> import torch, fxinspect
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(3, 2)))
    >>> tree = module_tree(fxinspect.analyze(model, torch.randn(1, 4), timing=False, memory=False))
    >>> tree["type"], [c["path"] for c in tree["children"]], [c["path"] for c in tree["children"][1]["children"]]
    ('Sequential', ['0', '1'], ['1.0', '1.1'])
    """

    def node(path: str) -> dict[str, Any]:
        record = report.modules[path]
        fields = {
            f.name: to_plain(getattr(record, f.name))
            for f in dataclasses.fields(record)
            if f.name not in ("children", "nodes", "registered")
        }
        fields.update(record.registered or {})
        return {**fields, "children": [node(c) for c in record.children if c in report.modules]}

    return node("") if "" in report.modules else {"children": [node(p) for p in report.modules if "." not in p]}


def to_json(
    report: ReportRecord, path: str | os.PathLike | None = None, indent: int | None = 1, layout: str = "flat"
) -> str:
    """The report as strict JSON text, also written to ``path`` (UTF-8) when given.

    ``layout="flat"`` (the default) is the whole report, which ``from_json`` reads back;
    ``"nested"`` is the module tree of :func:`module_tree` with the report's version.
    """
    if layout not in ("flat", "nested"):
        raise ValueError(f"layout must be 'flat' or 'nested', got {layout!r}")
    data = (
        report_to_dict(report)
        if layout == "flat"
        else {"schema_version": report.schema_version, "model": module_tree(report)}
    )
    text = json.dumps(data, indent=indent, allow_nan=False, ensure_ascii=False)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def _read(source: Any) -> str:
    if hasattr(source, "read"):
        return source.read()
    if isinstance(source, bytes):
        return source.decode("utf-8")
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return source
    return Path(source).read_text(encoding="utf-8")


def from_json(source: str | os.PathLike | typing.IO[str], cls: type[_Report] = ReportRecord) -> _Report:
    """Read a report from a path, a JSON string or an open file, as a ``cls``.

    ``cls`` is the record class to build (``fxinspect.Report`` passes itself, so
    reading gives a report with its views; the views never import it).

    Raises ``ValueError`` when the report was written with another schema version.
    """
    data = json.loads(_read(source))
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"cannot read this report: its schema_version is {version!r}, this fxinspect reads "
            f"schema_version {SCHEMA_VERSION}; re-run fxinspect.analyze with this version"
        )
    return _Restorer()(cls, data, "report")


# ------------------------------------------------------------------ tables of records


def _node_row(n: NodeRecord) -> dict[str, Any]:
    """One node as flat columns: tensors as shapes and dtypes, aten calls left out
    (they are a table of their own, one row per call)."""
    row: dict[str, Any] = {}
    for f in dataclasses.fields(n):
        value = getattr(n, f.name)
        if f.name in ("inputs", "outputs"):
            row[f"{f.name[:-1]}_shapes"] = tuple(t.shape for t in value)
            row[f"{f.name[:-1]}_dtypes"] = tuple(t.dtype for t in value)
        elif f.name == "registered":
            row.update(value or {})  # each registered figure a column of its own
        elif f.name != "aten":
            row[f.name] = value
    return row


def _rows(report: ReportRecord, by: By | str) -> list[dict[str, Any]]:
    by = By(by)
    if by is By.NODE:
        return [_node_row(n) for n in report.nodes]
    if by is By.MODULE:
        return [
            {
                **{f.name: getattr(m, f.name) for f in dataclasses.fields(m) if f.name != "registered"},
                **(m.registered or {}),
                "frozen_params": m.frozen_params,
            }
            for m in report.modules.values()
        ]
    raise ValueError(f"by={by.value!r}: exports are by 'node' or 'module'")


def to_dataframe(report: ReportRecord, by: By | str = By.NODE):
    """Nodes (graph order) or modules (model order) as a ``pandas.DataFrame``.

    Tuples (shapes, argument names) stay tuples; unmeasured figures are ``None``/NaN.
    """
    pd = pandas("to_dataframe")
    return pd.DataFrame(_rows(report, by))


def to_csv(report: ReportRecord, path: str | os.PathLike | None = None, by: By | str = By.NODE) -> str:
    """Nodes or modules as CSV text (no pandas needed), also written to ``path``.

    Tuple cells are JSON lists (``[1, 3, 224, 224]``), so they parse back; ``None`` is
    an empty cell.
    """
    rows = _rows(report, by)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {k: json.dumps(to_plain(v)) if isinstance(v, tuple) else ("" if v is None else v) for k, v in row.items()}
        )
    text = out.getvalue()
    if path is not None:
        Path(path).write_text(text, encoding="utf-8", newline="")
    return text
