"""What both sweeps print after their tables: why tiers failed, which ops went uncounted."""

from __future__ import annotations

import traceback
from typing import Any

from fxinspect.capture.base import one_line


def error_fields(exc: BaseException) -> dict[str, Any]:
    """A failed analysis as row fields: the one-line error, the traceback's tail, and
    each capture tier's reason when every tier failed."""
    return {
        "error": one_line(exc, limit=400),
        "traceback": traceback.format_exc()[-3000:],
        "failures": [list(f) for f in getattr(exc, "failures", None) or []],
    }


def report_fields(report: Any) -> dict[str, Any]:
    """What both sweeps keep of a report: method, tier failures, node and module figures."""
    ops = [n for n in report.nodes if n.is_op]
    return {
        "ok": True,
        "method": report.capture.method,
        "failures": [list(f) for f in report.capture.failures],
        "notes": list(report.capture.notes),
        "op_nodes": len(ops),
        "module_share": sum(1 for n in ops if n.module_path) / len(ops) if ops else 1.0,
        "root_ops": sorted({n.label for n in ops if not n.module_path}),
        "params": report.totals.params,
        "macs": report.totals.macs,
        "uncounted": [u.op for u in report.uncounted],
    }


def print_failed(rows: list[dict[str, Any]]) -> None:
    """One block per model that could not be analysed, with every tier's reason."""
    for r in rows:
        if not r["ok"]:
            print(f"FAILED {r['name']}: {r.get('error')}")
            for tier, reason in r.get("failures", []):
                print(f"    {tier}: {reason}")


def print_findings(rows: list[dict[str, Any]], only_ok: bool = False) -> None:
    """Count the one-line reasons earlier tiers gave and list uncounted aten ops."""
    reasons: dict[str, int] = {}
    for r in rows:
        if only_ok and not r["ok"]:
            continue
        for tier, reason in r.get("failures", []):
            key = f"{tier}: {reason[:110]}"
            reasons[key] = reasons.get(key, 0) + 1
    if reasons:
        print(f"\nwhy earlier tiers failed{' on models that were analysed' if only_ok else ''} (count):")
        for key, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
            print(f"  {count:3d}  {key}")
    uncounted: dict[str, list[str]] = {}
    for r in rows:
        for op in r.get("uncounted", []):
            uncounted.setdefault(op, []).append(r["name"])
    if uncounted:
        print("\nuncounted aten ops (models):")
        for op, names in sorted(uncounted.items()):
            print(f"  {op}: {len(names)} ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})")
