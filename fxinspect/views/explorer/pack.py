"""The explorer's data, packed: each figure, shape and path written once, not once per node.

A report's nodes and modules are lists of records with the same fields, and most of
their values repeat: the 80 decoder layers of a 70B model have the same figures, op
after op, and every op of a layer names the same module. :func:`pack` writes such a
list field by field (a column), and a column whose values repeat as its distinct
values once with, per record, the index of its own (its values themselves packed the
same way when they are records: a node's figures). Whole numbers are written without
``.0``. Nothing is lost: :func:`unpack` (and ``unpack.js`` on the page) gives back the
same data.

A packed list of records is ``{"n": count, "columns": {field: column}}`` (with
``"keys"``, the keys of a dict of records, in order); a column is ``{"all": [value per
record]}``, or ``{"of": distinct, "at": [index per record]}`` (``-1``: the record has
no such field; no ``"at"``: every record has the one value), ``distinct`` a list or
itself a packed list of records.

Example
-------
>>> packed = pack({"nodes": [{"a": 1.0, "b": "x"}, {"a": 2.0, "b": "x"}], "modules": {}})
>>> packed["nodes"]
{'n': 2, 'columns': {'a': {'all': [1, 2]}, 'b': {'of': ['x']}}}
>>> unpack(packed)["nodes"]
[{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'x'}]
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["pack", "unpack"]

_TABLES = ("nodes", "modules")  # the page data's lists (or dicts) of records


def pack(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (the explorer's payload) with its nodes and modules packed as columns,
    and every whole number written as one."""
    return {key: _records(v) if key in _TABLES else _whole(v) for key, v in data.items()}


def unpack(data: dict[str, Any]) -> dict[str, Any]:
    """The payload that :func:`pack` packed (``unpack.js`` does the same on the page)."""
    return {key: _unpacked(v) if key in _TABLES else v for key, v in data.items()}


def _records(rows: list[dict[str, Any]] | dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Records as columns; a dict of records keeps its keys."""
    keys = list(rows) if isinstance(rows, dict) else None
    records = list(rows.values()) if isinstance(rows, dict) else rows
    fields = list(dict.fromkeys(f for r in records for f in r))  # (in the order they first appear)
    packed: dict[str, Any] = {"n": len(records), "columns": {f: _column(records, f) for f in fields}}
    return {"keys": keys, **packed} if keys is not None else packed


_MISSING = object()


def _column(records: list[dict[str, Any]], field: str) -> dict[str, Any]:
    """One field of ``records``: its values in full, or its distinct values and an index
    per record, whichever is the shorter."""
    values = [r.get(field, _MISSING) for r in records]
    first: dict[Any, int] = {}
    distinct, count, at = [], [], []
    for v in values:
        if v is _MISSING:
            at.append(-1)
            continue
        key = _key(v)
        i = first.get(key)
        if i is None:
            i = first[key] = len(distinct)
            distinct.append(_whole(v))
            count.append(0)
        count[i] += 1
        at.append(i)
    if len(distinct) == 1 and -1 not in at:
        return {"of": _distinct(distinct)}
    lengths = [len(_text(v)) for v in distinct]
    written = sum(n * c for n, c in zip(lengths, count))  # (each value written out as often as it occurs)
    if -1 not in at and written <= sum(lengths) + len(_text(at)):
        return {"all": [distinct[i] for i in at]}
    return {"of": _distinct(distinct), "at": at}


def _distinct(values: list[Any]) -> list[Any] | dict[str, Any]:
    """Distinct values: records (a node's figures) are packed as columns in turn."""
    return _records(values) if len(values) > 1 and all(isinstance(v, dict) for v in values) else values


def _unpacked(packed: dict[str, Any]) -> list[dict[str, Any]] | dict[str, dict[str, Any]]:
    rows: list[dict[str, Any]] = [{} for _ in range(packed["n"])]
    for field, column in packed["columns"].items():
        if "all" in column:
            for row, v in zip(rows, column["all"]):
                row[field] = v
            continue
        of = column["of"] if isinstance(column["of"], list) else _unpacked(column["of"])
        for row, i in zip(rows, column.get("at", [0] * len(rows))):
            if i >= 0:
                row[field] = of[i]
    return dict(zip(packed["keys"], rows)) if "keys" in packed else rows


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_text = _ENCODER.encode


def _key(value: Any) -> Any:
    """What tells a value from the others (1 from True and from "1"; 2.0 is 2)."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", _whole(value))
    if isinstance(value, str):
        return ("s", value)
    return ("j", _text(value))


def _whole(value: Any) -> Any:
    """``value`` with each float that is a whole number as an int (``2.0`` is written
    ``2``; the page reads the same number)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_whole(v) for v in value]
    return value
