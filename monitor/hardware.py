"""Peak dense FP16/BF16 FLOP/s per device, with where each number comes from and how sure it is.

An unknown device gives no peak (so no MFU) and one warning: never a number borrowed from another chip
(peers that fell back reported MFU above 100 %).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .log import logger


@dataclass(frozen=True)
class Peak:
    """``flops``: dense FP16/BF16 FLOP/s of one device (no sparsity); ``confidence``: official|derived|estimate."""

    flops: float
    source: str
    confidence: str


T = 1e12
PEAKS = {
    "A100": Peak(312 * T, "NVIDIA A100 datasheet (2020), BF16/FP16 Tensor Core dense", "official"),
    "H100-SXM": Peak(989 * T, "NVIDIA H100 datasheet, SXM5, BF16 dense (1979 with sparsity)", "official"),
    "H100-PCIE": Peak(756 * T, "NVIDIA H100 datasheet, PCIe, BF16 dense (1513 with sparsity)", "official"),
    "H200": Peak(989 * T, "NVIDIA H200 datasheet, SXM, BF16 dense (same compute as H100 SXM)", "official"),
    "Ascend910A": Peak(256 * T, "Huawei Ascend 910 launch (2019): 256 TFLOPS FP16", "official"),
    "Ascend910B1": Peak(364 * T, "derived: cube units x clock; no official per-model figure", "derived"),
    "Ascend910B2": Peak(354 * T, "derived; third-party tables say 320-354", "derived"),
    "Ascend910B3": Peak(295 * T, "derived; no official per-model figure", "derived"),
    "Ascend910B4": Peak(246 * T, "derived; no official per-model figure", "derived"),
    "Ascend910C": Peak(780 * T, "analyst estimate per package (two dies)", "estimate"),
}
_ALIASES = {"H100": "H100-SXM", "910A": "Ascend910A", "910B1": "Ascend910B1", "910B2": "Ascend910B2",
            "910B3": "Ascend910B3", "910B4": "Ascend910B4", "910C": "Ascend910C"}


def normalise(name: str) -> str | None:
    """Table key for a device name as reported (``Ascend910B2C``, ``NVIDIA H100 80GB HBM3``...), or None."""
    n = name.strip().replace(" ", "").upper()
    for key in sorted(PEAKS, key=len, reverse=True):
        if key.upper().replace("-", "") in n.replace("-", ""):
            return key
    for alias, key in _ALIASES.items():
        if alias.upper() in n:
            return key
    return None


def peak_flops(device: str | None = None, override_tflops: float | None = None) -> float | None:
    """Peak FLOP/s of one device: ``override_tflops`` (config) or ``MONITOR_PEAK_TFLOPS`` (env) first, then
    the table entry for ``device`` (or ``MONITOR_DEVICE``). None, with one warning, when unknown."""
    override = override_tflops if override_tflops is not None else os.environ.get("MONITOR_PEAK_TFLOPS")
    if override not in (None, ""):
        return float(override) * T
    name = device or os.environ.get("MONITOR_DEVICE")
    key = normalise(name) if name else None
    if key is None:
        logger.warning("no peak FLOP/s known for device {!r}: MFU is not reported (set peak_tflops or "
                       "MONITOR_PEAK_TFLOPS)", name)
        return None
    return PEAKS[key].flops
