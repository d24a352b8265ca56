"""Replay's bounded quantile sample: Cython pure-Python mode (compiled by ``setup.py`` with ``sample.pxd``,
so that the compiled reader, :mod:`.scan`, adds to it from C; plain Python when not built)."""
from __future__ import annotations


class Sample:
    """An evenly spaced sample of a stream, for quantiles: every value until ``size`` are held; then, each time
    the sample is full, every other held value is dropped and only every 2nd, 4th, ... value is taken. The
    quantiles are exact up to ``size`` values and, beyond, exact quantiles of a systematic sample spread over
    the whole stream (deterministic: the same log gives the same numbers)."""

    def __init__(self, size: int = 4096):
        self.values: list[float] = []
        self.size, self.stride, self.skip, self.count = size, 1, 1, 0

    def add(self, value: float) -> None:
        self.count += 1
        self.skip -= 1
        if self.skip:
            return
        self.skip = self.stride
        self.values.append(value)
        if len(self.values) >= self.size:
            del self.values[1::2]
            self.stride *= 2

    def quantiles(self, *qs) -> list:
        """The ``qs`` (0..1) quantiles, linearly interpolated between the sampled values (numpy's default)."""
        v = sorted(self.values)
        out = []
        for q in qs:
            pos = q * (len(v) - 1)
            i = int(pos)
            out.append(v[i] if i + 1 >= len(v) else v[i] + (v[i + 1] - v[i]) * (pos - i))
        return out
