"""Detectors: one per rule id.

Every detector sees the records of one rank in step order and answers, per record, either nothing or
``(value, onset_step, message)``. Detectors hold only bounded state (a window of recent values), so
the same detector serves a live run and a million-line replay.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from bisect import bisect_left, insort
from collections import deque
from math import isfinite

from .record import StepRecord
from .rules import RuleConfig


class Detector(ABC):
    """Base detector: ``update(record)`` returns ``(value, onset_step, message)`` or None."""

    def __init__(self, cfg: RuleConfig):
        self.cfg = cfg
        self.warmup_steps = cfg.warmup_steps
        self.__dict__.update(cfg.params)

    @abstractmethod
    def update(self, rec: StepRecord) -> tuple[float, int, str] | None:
        """Judge one record (and learn from it)."""

    def rewind(self, step: int) -> None:
        """Forget what was seen after ``step`` (the run went back to it: rollback or resume)."""


class NanInf(Detector):
    """Loss not finite; or grad norm not finite on a step not flagged as a loss-scale overflow."""

    def update(self, rec):
        if rec.loss is not None and not isfinite(rec.loss):
            return rec.loss, rec.step, f"loss is {rec.loss} at step {rec.step}"
        if rec.grad_norm is not None and not isfinite(rec.grad_norm) and not rec.overflow:
            return rec.grad_norm, rec.step, f"grad norm is {rec.grad_norm} at step {rec.step} without an overflow"
        return None


def median(sorted_values: list[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else 0.5 * (sorted_values[mid - 1] + sorted_values[mid])


def _sigmas(d: float, s: float) -> str:
    """``d / s`` for a message; a window of identical values (a loss stuck at 0) has ``s == 0``."""
    return f"{d / s:.1f}" if s > 0 else "inf"


class SortedWindow:
    """The last ``size`` ``(step, value)`` pairs in order, and their values sorted (O(1) median)."""

    __slots__ = ("items", "size", "sorted")

    def __init__(self, size: int):
        self.size = size
        self.items: deque[tuple[int, float]] = deque()
        self.sorted: list[float] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, step: int, x: float) -> None:
        items, values = self.items, self.sorted
        items.append((step, x))
        insort(values, x)
        if len(items) > self.size:
            del values[bisect_left(values, items.popleft()[1])]

    def median(self) -> float:
        values = self.sorted
        n = len(values)
        mid = n // 2
        return values[mid] if n % 2 else 0.5 * (values[mid - 1] + values[mid])

    def sigma(self, m: float) -> float:
        """Robust standard deviation around ``m``: the MAD times 1.4826 (normal-consistent; Rousseeuw &
        Croux 1993)."""
        return 1.4826 * median(sorted(abs(v - m) for v in self.sorted))

    def rewind(self, step: int) -> None:
        """Drop the values of steps after ``step``."""
        while self.items and self.items[-1][0] > step:
            del self.sorted[bisect_left(self.sorted, self.items.pop()[1])]


class LazySortedWindow(SortedWindow):
    """A :class:`SortedWindow` of finite values that sorts them only when asked, for a window read now and
    then: adding is an append. Same median and sigma (the same values, sorted)."""

    __slots__ = ("stale",)

    def __init__(self, size: int):
        super().__init__(size)
        self.items = deque(maxlen=size)
        self.stale = False

    def add(self, step: int, x: float) -> None:
        self.items.append((step, x))
        self.stale = True

    def _sort(self) -> None:
        if self.stale:
            self.sorted = sorted([v for _, v in self.items])
            self.stale = False

    def median(self) -> float:
        self._sort()
        return super().median()

    def sigma(self, m: float) -> float:
        self._sort()
        return super().sigma(m)

    def rewind(self, step: int) -> None:
        while self.items and self.items[-1][0] > step:
            self.items.pop()
            self.stale = True


class RobustSpike(Detector):
    """Upward spike of one field against the median and MAD of its last ``window`` finite values.

    Fires when ``x > m + threshold * s`` and ``x > (1 + min_ratio) * m``, with ``m`` the median, ``s`` the
    MAD times 1.4826 (the normal-consistent scale; Rousseeuw & Croux 1993) floored at
    ``min_sigma_ratio * m``. The onset is the earliest step of the contiguous run, ending at the detected
    step, whose values all exceed ``m + threshold * s / 2``. Steps up to ``warmup_steps`` are not judged
    nor learned from (compile, noisy start). With ``confirm_steps: 2`` a value over the bound fires only
    when the next value is still over ``m + threshold * s / 2`` (a one-batch outlier that clipping
    absorbs is not an event); the event then carries the first step.
    """

    field = ""
    label = ""

    confirm_steps = 1

    def __init__(self, cfg):
        super().__init__(cfg)
        self.history = SortedWindow(self.window)
        self.pending = None  # (event, soft bound) of a value over the bound awaiting confirmation
        self._ratio, self._least = 1.0 + self.min_ratio, self.threshold * self.min_sigma_ratio

    def update(self, rec):
        x = getattr(rec, self.field)
        if x is None or rec.step <= self.warmup_steps or not isfinite(x) or rec.overflow:
            return None
        return self._spike(rec, x)

    def _spike(self, rec, x):
        """Judge and learn ``x``, the finite value of a record past the warm-up that did not overflow."""
        out, pending, self.pending = None, self.pending, None
        hist = self.history
        if pending is not None and x > pending[1]:
            out = pending[0]
        elif len(hist.items) >= self.min_history:
            m = hist.median()
            # cheap bound first: with s >= min_sigma_ratio * |m| no value under it can fire
            if x > self._ratio * m and x > m + self._least * abs(m):
                s = max(hist.sigma(m), self.min_sigma_ratio * abs(m))
                if x > m + self.threshold * s:
                    event = self._event(rec.step, x, m, s)
                    if self.confirm_steps > 1 and not self._corroborated(rec):
                        self.pending = (event, m + 0.5 * self.threshold * s)
                    else:
                        out = event
        hist.add(rec.step, x)
        return out

    def _event(self, step, x, m, s):
        soft, onset = m + 0.5 * self.threshold * s, step
        for prev, v in reversed(self.history.items):
            if v <= soft:
                break
            onset = prev
        return (x, onset, f"{self.label} {x:.4g} at step {step} vs median {m:.4g} "
                          f"of the last {len(self.history)} steps ({_sigmas(x - m, s)} robust sigma)")

    def _corroborated(self, rec) -> bool:
        """True when the same step's other evidence confirms a spike at once (no waiting for the next step)."""
        return False

    def rewind(self, step):
        self.history.rewind(step)
        self.pending = None


class LossSpike(RobustSpike):
    """Loss spike (see :class:`RobustSpike`), plus a level shift: the median of the last ``shift_steps``
    losses above the window's median by ``shift_sigma`` robust sigmas (floored as for the spike). An LR
    surge too mild for a one-step spike keeps the loss up for several steps; healthy noise does not (on
    the curves of ``benchmarks/detection_quality.py`` the statistic stays under 2.1 sigma on healthy runs
    and reaches 3.2-7.8 within five steps of an LR surge). Onset: the first step of the shift."""

    field, label = "loss", "loss"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.recent = SortedWindow(max(self.shift_steps, 1))  # the last shift_steps losses

    def update(self, rec):
        x = rec.loss
        if x is None or rec.step <= self.warmup_steps or not isfinite(x) or rec.overflow:
            return None
        out, k = self._spike(rec, x), self.shift_steps
        if not k:
            return out
        recent, hist = self.recent, self.history
        recent.add(rec.step, x)
        if out is not None or len(recent.items) < k or len(hist.items) < self.min_history + k:
            return out
        level, m = recent.median(), hist.median()
        if level <= m:  # cheap tests first: a falling or flat loss never shifts up...
            return None
        floor = self.min_sigma_ratio * abs(m)
        if level <= m + self.shift_sigma * floor:  # ...nor one under the bound at the floor of s (s >= floor)
            return None
        s = max(hist.sigma(m), floor)
        if level <= m + self.shift_sigma * s:
            return None
        soft, onset = m + 0.5 * self.shift_sigma * s, rec.step
        for step, v in reversed(recent.items):
            if v <= soft:
                break
            onset = step
        return (level, onset, f"loss level {level:.4g} over the last {k} steps vs median {m:.4g} of the last "
                              f"{len(self.history)} ({_sigmas(level - m, s)} robust sigma)")

    def rewind(self, step):
        super().rewind(step)
        self.recent.rewind(step)


class GradNormSpike(RobustSpike):
    """Grad-norm spike (see :class:`RobustSpike`), plus a sustained climb: the median of the last
    ``climb_window`` norms above ``climb_ratio`` x the median of the whole window, which often precedes a
    loss spike (checked every ``climb_window // 2`` steps once the window is full).

    A spike needs no confirmation by the next step when the same step's loss is also above the median of
    its last ``window`` finite values by ``confirm_loss_sigma`` robust sigmas: a damaging update (an LR
    surge) lifts both at once, while a one-batch grad-norm outlier leaves the loss where it was (on the
    curves of ``benchmarks/detection_quality.py``: loss 2.7-7.9 sigma up on the first step after an LR
    surge, at most 1.6 on the healthy runs' grad-norm outliers). 0 turns this off."""

    field, label = "grad_norm", "grad norm"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.losses = LazySortedWindow(self.window)  # read only to corroborate a spike
        self._climb_every = max(self.climb_window // 2, 1)

    def _corroborated(self, rec):
        losses = self.losses
        if not self.confirm_loss_sigma or rec.loss is None or len(losses) < self.min_history:
            return False
        m = losses.median()
        return rec.loss > m + self.confirm_loss_sigma * max(losses.sigma(m), 1e-6 * abs(m))

    def rewind(self, step):
        super().rewind(step)
        self.losses.rewind(step)

    def update(self, rec):
        out = RobustSpike.update(self, rec)
        loss = rec.loss
        if loss is not None and isfinite(loss) and not rec.overflow and rec.step > self.warmup_steps:
            self.losses.add(rec.step, loss)
        hist, k = self.history, self.climb_window
        if out is None and len(hist.items) == self.window and rec.step % self._climb_every == 0:
            recent = [hist.items[i] for i in range(len(hist) - k, len(hist))]
            base, new = hist.median(), median(sorted(v for _, v in recent))
            if new > self.climb_ratio * base:
                rise = base * (1.0 + self.climb_ratio) / 2  # half way up: where the climb began
                onset = next(s for s, v in recent if v > rise)
                out = (new, onset, f"grad norm climbing: median {new:.4g} over the last {k} steps vs {base:.4g} "
                                   f"over the last {len(hist)} ({new / base:.1f}x)")
        return out


class RecentSteps(deque):
    """Steps at which something happened (an overflow, a halving), kept while within ``window`` steps of
    the latest; ``self[0]`` is the oldest kept."""

    def __init__(self, window: int):
        super().__init__()
        self.window = window

    def add(self, step: int, times: int = 1) -> int:
        """Record ``times`` occurrences at ``step``, forget those ``window`` steps old; return how many are kept."""
        self.extend([step] * times)
        while self and self[0] <= step - self.window:
            self.popleft()
        return len(self)

    def rewind(self, step: int) -> None:
        while self and self[-1] > step:
            self.pop()


class OverflowStorm(Detector):
    """At least ``max_overflows`` overflowed steps within the last ``window`` steps, after calibration;
    or, at once, an overflow at a loss scale more than ``max_growth`` times the previous step's, which a
    dynamic loss scaler (growing by at most its factor, 2, per step) cannot have produced: a scale
    restored from another state, a stale scaler.

    Calibration is the stretch of overflows before the first clean step, while a dynamic loss scale
    halves down from its initial value; those never count, up to ``max_calibration`` of them (24 by
    default: from 2^32, DeepSpeed's initial scale, down to 2^8): a start-up that keeps overflowing past
    that is a storm, not calibration. The onset is the window's first overflow.
    """

    def __init__(self, cfg):
        super().__init__(cfg)
        self.calibrated = False
        self.calibration = 0  # overflows before the first clean step
        self.overflow_steps = RecentSteps(self.window)
        self.prev_scale: float | None = None

    def update(self, rec):
        if rec.overflow is None:
            return None
        prev, self.prev_scale = self.prev_scale, rec.loss_scale
        if not rec.overflow:
            self.calibrated = True
            return None
        if not self.calibrated:
            self.calibration += 1
            if self.calibration <= self.max_calibration:
                return None
            self.calibrated = True
        if prev and rec.loss_scale and rec.loss_scale > self.max_growth * prev:
            return (rec.loss_scale, rec.step, f"overflow at loss scale {rec.loss_scale:.6g}, {rec.loss_scale / prev:.6g}x "
                                              f"the previous step's {prev:.6g}: not the dynamic scaler's doing")
        q = self.overflow_steps
        if q.add(rec.step) >= self.max_overflows:
            return (float(len(q)), q[0], f"{len(q)} overflowed steps within {self.window} steps "
                                         f"(loss scale {rec.loss_scale})")
        return None

    def rewind(self, step):
        self.overflow_steps.rewind(step)
        self.prev_scale = None


class LossScaleCollapse(Detector):
    """Loss scale fallen to ``floor`` or below, or halved at least ``max_halvings`` times within ``window``
    steps, after calibration (the halvings before the first clean step). A scale that never moved (static
    scaling, or bf16 with a scale of 1) is not judged. Onset: the first halving of the fall."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.calibrated, self.prev, self.highest = False, None, 0.0
        self.drops = RecentSteps(self.window)

    def update(self, rec):
        scale = rec.loss_scale
        if scale is None:
            return None
        prev, self.prev = self.prev, scale
        if scale > self.highest:  # as max(self.highest, scale), without a call per step
            self.highest = scale
        if not self.calibrated:  # the fall into the first clean step is still calibration
            self.calibrated = rec.overflow is False
            return None
        q = self.drops
        q.add(rec.step, max(1, round(math.log2(prev / scale))) if prev is not None and scale < prev else 0)
        if scale <= self.floor < self.highest:
            return scale, q[0] if q else rec.step, f"loss scale {scale:g} at its floor {self.floor:g}"
        if len(q) >= self.max_halvings:
            return scale, q[0], f"loss scale halved {len(q)} times within {self.window} steps, now {scale:g}"
        return None

    def rewind(self, step):
        self.drops.rewind(step)
        self.prev = None


class LossDegenerate(Detector):
    """Loss exactly zero (below ``zero_below``), or the same value for ``frozen_steps`` steps in a row
    (a dead graph, a constant batch, a loss that no longer depends on the weights)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.same_since, self.last = None, None

    def update(self, rec):
        x = rec.loss
        if x is None or not isfinite(x) or rec.step <= self.warmup_steps:
            return None
        if abs(x) < self.zero_below:
            return x, rec.step, f"loss is {x:g} at step {rec.step}"
        if x != self.last:
            self.same_since, self.last = rec.step, x
            return None
        if rec.step - self.same_since + 1 >= self.frozen_steps:
            return x, self.same_since, f"loss frozen at {x:g} since step {self.same_since}"
        return None

    def rewind(self, step):
        self.same_since, self.last = None, None


class LossPlateau(Detector):
    """Early plateau: before ``until_step``, the median loss of the last ``window // 5`` steps is not
    ``min_improvement`` below the median of the ``window // 5`` steps ``window`` steps earlier. Judged
    every ``window // 50`` steps (a plateau is slow; this keeps the per-step cost to an append)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.losses: deque[tuple[int, float]] = deque(maxlen=self.window)

    def update(self, rec):
        x = rec.loss
        if rec.step > self.until_step or x is None or not isfinite(x) or rec.step <= self.warmup_steps:
            return None
        q = self.losses
        q.append((rec.step, x))
        if len(q) < self.window or rec.step % max(self.window // 50, 1):
            return None
        k = max(self.window // 5, 1)
        old = median(sorted(v for _, v in list(q)[:k]))
        new = median(sorted(v for _, v in list(q)[-k:]))
        if new > old * (1.0 - self.min_improvement):
            return new, q[0][0], (f"loss plateau: median {new:.4g} over the last {k} steps vs {old:.4g} "
                                  f"{self.window} steps earlier (< {self.min_improvement:.0%} better)")
        return None

    def rewind(self, step):
        while self.losses and self.losses[-1][0] > step:
            self.losses.pop()


class SustainedLow(Detector):
    """Base for "too low for ``min_steps`` steps in a row" rules: tracks the current low run."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.low_since = None

    def low(self, step: int) -> int | None:
        """``step`` is low: the run's first step once the run has lasted ``min_steps``, else None."""
        self.low_since = self.low_since or step
        return self.low_since if step - self.low_since + 1 >= self.min_steps else None

    def rewind(self, step):
        self.low_since = None


class BelowRollingMedian(SustainedLow):
    """A field below ``ratio`` x its rolling median (``window`` values) for ``min_steps`` steps in a row.
    Onset: the first low step. The low values are kept out of the median."""

    field = ""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.values = SortedWindow(self.window)

    def update(self, rec):
        x = getattr(rec, self.field)
        if x is None or rec.step <= self.warmup_steps:
            return None
        if len(self.values.items) < self.min_history:
            self.values.add(rec.step, x)
            return None
        m = self.values.median()
        if x >= self.ratio * m:
            self.low_since = None
            self.values.add(rec.step, x)
            return None
        onset = self.low(rec.step)
        if onset is None:
            return None
        return x, onset, f"{self.field} {x:.4g} below {self.ratio:.0%} of its median {m:.4g} since step {onset}"

    def rewind(self, step):
        self.values.rewind(step)
        super().rewind(step)


class ThroughputDrop(BelowRollingMedian):
    field = "tokens_per_second"  # a StepRecord property: tokens / step time


class LowMfu(SustainedLow):
    """MFU below ``floor`` for ``min_steps`` steps in a row (after warm-up). Onset: the first low step."""

    def update(self, rec):
        if rec.mfu is None or rec.step <= self.warmup_steps:
            return None
        if rec.mfu >= self.floor:
            self.low_since = None
            return None
        onset = self.low(rec.step)
        return None if onset is None else (rec.mfu, onset, f"MFU {rec.mfu:.1%} below the floor {self.floor:.0%}")


DETECTORS = {"nan_inf": NanInf, "loss_spike": LossSpike, "grad_norm_spike": GradNormSpike,
             "overflow_storm": OverflowStorm, "loss_scale_collapse": LossScaleCollapse,
             "loss_degenerate": LossDegenerate, "loss_plateau": LossPlateau, "throughput_drop": ThroughputDrop,
             "low_mfu": LowMfu}
