"""Bounded summaries of a replayed series: quantiles for the terminal summary, plot points for the HTML report.

Whatever the log's length, memory stays fixed: :class:`~.sample.Sample` holds at most ``size`` values and
:class:`Envelope` at most 4 points per bucket of ``buckets``.
"""
from __future__ import annotations

import math
from typing import Any

from .sample import Sample

PLOT_BUCKETS = 1000
STATS = ("step_time_s", "tokens_per_second", "mfu")  # what the summary gives median, p5 and p95 of
PLOTTED = ("loss", "grad_norm", "loss_scale", "tokens_per_second", "mfu", "step_time_s")


class Stats:
    """Median, 5th and 95th percentile of step time (s), TPS (tokens/s, all ranks) and MFU (0..1) over a log's
    records (each logged record counts once; in interval logs it is the interval's average)."""

    def __init__(self):
        self.samples = {name: Sample() for name in STATS}

    def add(self, rec) -> None:
        t = rec.step_time_s
        if t and t > 0 and t != math.inf:
            s = self.samples
            s["step_time_s"].add(t)
            tps = rec.tokens_per_second
            if tps is not None:
                s["tokens_per_second"].add(tps)
        if rec.mfu is not None and math.isfinite(rec.mfu):
            self.samples["mfu"].add(rec.mfu)

    def to_dict(self) -> dict:
        """``{field: {"median", "p5", "p95", "count", "sampled"}}`` for the fields the log has."""
        out = {}
        for name, s in self.samples.items():
            if s.values:
                p50, p5, p95 = s.quantiles(0.5, 0.05, 0.95)
                out[name] = {"median": p50, "p5": p5, "p95": p95, "count": s.count, "sampled": len(s.values)}
        return out


class Envelope:
    """A min/max-preserving downsample of one series: consecutive records fall in buckets of ``width``; each
    bucket keeps its first, lowest, highest and last point, so a one-step spike survives any downsampling.
    When ``buckets`` buckets are full, neighbours merge in pairs and ``width`` doubles. Non-finite values are
    left out (the ``nan_inf`` events mark them)."""

    __slots__ = ("buckets", "width", "done", "n", "first", "lo", "hi", "last", "count")

    def __init__(self, buckets: int = PLOT_BUCKETS):
        self.buckets, self.width, self.n, self.count = buckets, 1, 0, 0
        self.done: list[tuple] = []
        self.first: Any = None  # (index, x, y) points once count > 0
        self.lo: Any = None
        self.hi: Any = None
        self.last: Any = None

    def add(self, x: float, y: float) -> None:
        if not math.isfinite(y):
            return
        p = (self.n, x, y)
        self.n += 1
        if self.count == 0:
            self.first = self.lo = self.hi = p
        elif y < self.lo[2]:
            self.lo = p
        elif y > self.hi[2]:
            self.hi = p
        self.last = p
        self.count += 1
        if self.count == self.width:
            self._close()

    def _close(self) -> None:
        self.done.append((self.first, self.lo, self.hi, self.last))
        self.count = 0
        if len(self.done) >= self.buckets:
            d = self.done
            self.done = [(a[0], min(a[1], b[1], key=_y), max(a[2], b[2], key=_y), b[3])
                         for a, b in zip(d[::2], d[1::2])]
            if len(d) % 2:
                self.done.append(d[-1])
            self.width *= 2

    def points(self) -> tuple[list, list]:
        """(x, y) of the kept points in the order they came."""
        buckets = self.done + ([(self.first, self.lo, self.hi, self.last)] if self.count else [])
        xs, ys = [], []
        for b in buckets:
            for _, x, y in sorted(set(b)):
                xs.append(x)
                ys.append(y)
        return xs, ys


def _y(p):
    return p[2]


class Track:
    """One rank's plotted series (:data:`PLOTTED`), each an :class:`Envelope` over the step."""

    def __init__(self):
        self.series: dict[str, Envelope] = {}

    def add(self, rec) -> None:
        step, series = rec.step, self.series
        for name in PLOTTED:
            v = getattr(rec, name)
            if v is not None:
                env = series.get(name)
                if env is None:
                    env = series[name] = Envelope()
                env.add(step, float(v))
