"""Device presets for the time model: dense peak FLOP/s per dtype, memory bandwidth.

``fxinspect.devices.get(name)`` (this module) returns a :class:`DeviceSpec`: a preset by
its short name (``"h100-sxm"``) or by the name the driver gives
(``torch.cuda.get_device_name()``, such as ``"NVIDIA H100 80GB HBM3"``), or
``"measured"``: this host, measured by a short microbenchmark
(:mod:`fxinspect.timemodel.host`) and its kernel classes calibrated (:func:`calibrate`,
:mod:`fxinspect.timemodel.calibration`), checked and cached per machine. A spec measured
on one device prices another of its family by the ratios of their roofs
(:func:`scaled_to`).

Every preset is a datasheet's *dense* figure; the sparse ("with sparsity") figures the
same sheets print beside them, twice as large, are never used. The source of each is
in the comment above it; ``tests/test_devices.py`` checks the numbers against those
sheets' ratios. ``launch_overhead`` is the time a kernel costs beyond its work, per aten
op (a datasheet does not give it: a typical figure for the device class).

Example
-------
>>> import torch
>>> spec = get("NVIDIA H100 80GB HBM3")
>>> spec.name, spec.peak(torch.bfloat16) / 1e12, spec.memory_bandwidth / 1e12
('h100-sxm', 989.4, 3.35)
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import InputError
from ..records.device_spec import DeviceSpec
from . import calibration

__all__ = ["PRESETS", "DeviceSpec", "calibrate", "get", "measured_spec", "scaled_to"]

T = 1e12


def _nvidia(fp64: float, fp32: float, bf16: float, fp8: float | None = None) -> dict:
    """Dense figures per dtype, in TFLOPS (float32 is the plain, non-TF32 figure)."""
    peaks = {"float64": fp64 * T, "float32": fp32 * T, "bfloat16": bf16 * T, "float16": bf16 * T}
    if fp8 is not None:  # (the A100 has no FP8 units: it is not listed there)
        peaks["float8_e4m3fn"] = peaks["float8_e5m2"] = fp8 * T
    return peaks


PRESETS: dict[str, DeviceSpec] = {
    # NVIDIA A100 Tensor Core GPU datasheet (2021), SXM: FP64 tensor 19.5, FP32 19.5,
    # TF32 156, BF16/FP16 312 TFLOPS dense; HBM2 1,555 GB/s (40GB), HBM2e 2,039 GB/s (80GB);
    # NVLink 600 GB/s
    "a100-40gb": DeviceSpec(
        "a100-40gb",
        _nvidia(19.5, 19.5, 312),
        1555e9,
        tf32_flops=156 * T,
        interconnect={"nvlink": 600e9, "pcie": 64e9},
        source="NVIDIA A100 datasheet",
    ),
    "a100-80gb": DeviceSpec(
        "a100-80gb",
        _nvidia(19.5, 19.5, 312),
        2039e9,
        tf32_flops=156 * T,
        interconnect={"nvlink": 600e9, "pcie": 64e9},
        source="NVIDIA A100 datasheet",
    ),
    # NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: FP64 tensor 67, FP32 67, TF32 494.7,
    # BF16/FP16 989.4, FP8 1,978.9 TFLOPS dense (the sheet's 989/1,979/3,958 are with
    # sparsity); HBM3 3.35 TB/s; NVLink 900 GB/s
    "h100-sxm": DeviceSpec(
        "h100-sxm",
        _nvidia(67, 67, 989.4, 1978.9),
        3.35e12,
        tf32_flops=494.7 * T,
        interconnect={"nvlink": 900e9, "pcie": 128e9},
        source="NVIDIA H100 datasheet",
    ),
    # the same sheet, H100 PCIe: FP64 tensor 51, FP32 51, TF32 378, BF16/FP16 756.5, FP8 1,513
    # TFLOPS dense; HBM2e 2 TB/s; NVLink bridge 600 GB/s
    "h100-pcie": DeviceSpec(
        "h100-pcie",
        _nvidia(51, 51, 756.5, 1513),
        2.0e12,
        tf32_flops=378 * T,
        interconnect={"nvlink": 600e9, "pcie": 128e9},
        source="NVIDIA H100 datasheet",
    ),
    # NVIDIA H200 datasheet, SXM: compute as the H100 SXM (BF16 989.4 dense), HBM3e 4.8 TB/s
    "h200": DeviceSpec(
        "h200",
        _nvidia(67, 67, 989.4, 1978.9),
        4.8e12,
        tf32_flops=494.7 * T,
        interconnect={"nvlink": 900e9, "pcie": 128e9},
        source="NVIDIA H200 datasheet",
    ),
    # NVIDIA L4 datasheet: FP32 30.3, TF32 60, BF16/FP16 121, FP8 242.5 TFLOPS dense (120 /
    # 242 / 485 with sparsity); GDDR6 300 GB/s; FP64 is 1/64 of FP32
    "l4": DeviceSpec(
        "l4",
        _nvidia(30.3 / 64, 30.3, 121, 242.5),
        300e9,
        tf32_flops=60 * T,
        interconnect={"pcie": 64e9},
        source="NVIDIA L4 datasheet",
    ),
    # NVIDIA L40S datasheet: FP32 91.6, TF32 183, BF16/FP16 362.05, FP8 733 TFLOPS dense
    # (366 / 733 / 1,466 with sparsity); GDDR6 864 GB/s
    "l40s": DeviceSpec(
        "l40s",
        _nvidia(91.6 / 64, 91.6, 362.05, 733),
        864e9,
        tf32_flops=183 * T,
        interconnect={"pcie": 64e9},
        source="NVIDIA L40S datasheet",
    ),
    # AMD Instinct MI300X datasheet: FP64 matrix 163.4, FP32 163.4, TF32 653.7, BF16/FP16
    # 1,307.4, FP8 2,614.9 TFLOPS dense (twice with sparsity); HBM3 5.3 TB/s; Infinity
    # Fabric 896 GB/s peak aggregate
    "mi300x": DeviceSpec(
        "mi300x",
        _nvidia(163.4, 163.4, 1307.4, 2614.9),
        5.3e12,
        tf32_flops=653.7 * T,
        interconnect={"infinity_fabric": 896e9, "pcie": 128e9},
        source="AMD Instinct MI300X datasheet",
    ),
}

# the patterns of the names drivers report, per preset (how a name is resolved, not a
# figure of the device: kept out of the spec, which the report carries)
_ALIASES: dict[str, tuple[str, ...]] = {
    "a100-40gb": (r"A100.*40GB", r"A100-SXM4-40GB", r"A100-PCIE-40GB"),
    "a100-80gb": (r"A100.*80GB",),
    "h100-sxm": (r"H100.*HBM3", r"H100 SXM", r"H100-SXM"),
    "h100-pcie": (r"H100 PCIe", r"H100-PCIE"),
    "h200": (r"H200",),
    "l4": (r"\bL4\b",),
    "l40s": (r"L40S",),
    "mi300x": (r"MI300X",),
}


def get(name: str | DeviceSpec) -> DeviceSpec:
    """A spec by preset name, by the driver's device name, or ``"measured"`` (this host)."""
    if isinstance(name, DeviceSpec):
        return name
    if not isinstance(name, str):
        raise InputError(f"device_spec= takes a preset name, a DeviceSpec or 'measured', got {type(name).__name__}")
    key = name.strip().lower()
    if key == "measured":
        return calibrate()
    if key in PRESETS:
        return PRESETS[key]
    for preset, patterns in _ALIASES.items():
        if any(re.search(pattern, name, re.IGNORECASE) for pattern in patterns):
            return PRESETS[preset]
    raise InputError(f"no device spec named {name!r}; presets: {', '.join(PRESETS)}, or 'measured'")


def calibrate(device: str | None = None, budget_s: float = 60.0, refresh: bool = False) -> DeviceSpec:
    """This host's measured spec (``device``: ``"cpu"``, or ``"cuda"`` when one is
    present), its kernel classes calibrated in at most about ``budget_s`` seconds when
    the cache is missing, stale, implausible or ``refresh`` is set (see
    :mod:`fxinspect.timemodel.calibration`); ``device_spec="measured"`` is this."""
    data = calibration.calibrated(device, budget_s, refresh)
    spec = measured_spec(data["roofs"])
    return replace(spec, source=f"{spec.source}; {calibration.provenance(data)}", efficiency=data["efficiency"])


def scaled_to(spec: DeviceSpec, target: str | DeviceSpec, reference: str | DeviceSpec | None = None) -> DeviceSpec:
    """``spec``, measured on one device, pricing ``target`` (a preset's name, a driver's
    device name, or a spec) of the same architecture family: its roofs times the ratios
    of ``target``'s datasheet roofs to ``reference``'s, the preset of the device it was
    measured on (found from ``spec``'s name when ``None``: a calibration's is
    ``"measured (cuda: NVIDIA H100 80GB HBM3)"``; its own roofs when none matches);
    its kernel efficiencies kept (:meth:`DeviceSpec.scaled_to`). An H100's calibration
    prices an H200 so: its compute roofs the same, its bandwidth 4.8 / 3.35 times."""
    if reference is None:
        reference = next(
            (PRESETS[p] for p, pats in _ALIASES.items() if any(re.search(x, spec.name, re.I) for x in pats)), None
        )
    return spec.scaled_to(get(target), get(reference) if reference is not None else None)


def measured_spec(data: dict) -> DeviceSpec:
    """The spec of figures :func:`~fxinspect.timemodel.host.measured` gives."""
    return DeviceSpec(
        f"measured ({data['device']})",
        data["peak_flops"],
        data["memory_bandwidth"],
        launch_overhead=data["launch_overhead"],
        source=_provenance(data),
        matmul_rates=tuple(tuple(p) for p in data.get("matmul_rates", ())),
    )


def _provenance(data: dict) -> str:
    """When and how measured figures were taken, for the spec's ``source``."""
    text = f"measured on {data['host']} at {data.get('taken_at', 'an unknown time')} with torch {data['torch']}"
    if "trials" in data:
        fewest = min(sum(len(t["seconds"]) for t in runs) for runs in data["trials"].values())
        text += f", {data['threads']} threads, each figure the best of at least {fewest} trials"
    return text
