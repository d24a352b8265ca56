"""Parser for MindFormers ``MFLossMonitor`` logs, every line shape seen in public logs.

Shapes handled (see ``tests/data``):

* mid-2023: ``Epoch:[  1/  1], step:[    4/  125], loss:[2.244/2.244], time:507844.205 ms, lr:[0.],
  overflow cond: True, loss_scale: 268435460.0`` (``time`` is per sink call: per step = time / sink size);
* 1.x: ``{ Epoch:[  1/  2], step:[    1/   19], loss: 10.649, per_step_time: 103328ms, lr: 0.0,
  overflow cond: False, loss_scale: 1.0, global_norm: [1 31049], train_throughput_per_npu: 2.896T``
  (also ``loss:[x/y]`` in non-sink mode, ``global_norm [x]`` without a colon, a non-scalar norm
  printed as ``[1 31049]``, which is kept as unknown);
* any prefix (file handler ``[INFO] date [file:line] func:``, console ``date - [file:line] - INFO -``,
  or a bare ``- INFO -``).

What the trainer reports itself becomes an event: its global-norm threshold line (``Current global norm
[x] of step N has been K consecutive times greater than threshold``), the ``ValueError`` that stops the
run on it, and its NaN/Inf termination (``There is nan in loss ... terminate training``).
"""
from __future__ import annotations

import math
import re

from ..record import StepRecord

NAME = "mindformers"

_STEP = re.compile(r"Epoch:\[\s*(\d+)/\s*(\d+)\],\s*step:\[\s*(\d+)/\s*(\d+)\]")
_FIELDS = re.compile(
    r"\b(?P<key>loss|per_step_time|time|lr|overflow cond|loss_scale|global_norm|train_throughput_per_npu)\b"
    r"\s*:?\s*(?P<val>\[[^\]]*\]|[^,\s]+(?:\s*ms)?)")
_NORM_LINE = re.compile(r"Current global norm \[([^\]]*)\] of step (\d+) has been (\d+) consecutive times greater "
                        r"than threshold:? ?([\d.eE+-]+)(.*)")
_NAN_LINE = re.compile(r"There is (nan|inf) in (\w+) with value (.*?), terminate training")


def _number(text: str) -> float | None:
    """``"10.649"``, ``"[2.244/2.244]"`` (first), ``"[0.]"``, ``"nan"`` -> float; ``"[1 31049]"`` -> None."""
    t = text.strip().strip("[]").split("/")[0].strip()
    if t.endswith("ms"):
        t = t[:-2]
    if t.endswith("T"):
        t = t[:-1]
    try:
        return float(t)
    except ValueError:
        return None


def detect(line: str) -> bool:
    """True when ``line`` is an ``MFLossMonitor`` step line."""
    return _STEP.search(line) is not None and "loss" in line


class Parser:
    """Stateful line parser: ``feed(line)`` returns a StepRecord, a trainer report tuple
    ``(rule, step, value, message)``, or None for a line that is neither."""

    name = NAME

    def __init__(self):
        self.prev_step = 0

    def feed(self, line: str):
        m = _STEP.search(line)
        if m is not None:
            return self._record(line, m)
        m = _NORM_LINE.search(line)
        if m is not None:
            value, step = _number(m.group(1)), int(m.group(2))
            stopped = "stop training" in m.group(5) or line.lstrip().startswith("ValueError")
            msg = (f"trainer: global norm {m.group(1)} above its threshold {m.group(4)} "
                   f"{m.group(3)} consecutive time(s) at step {step}" + ("; training stopped" if stopped else ""))
            return ("grad_norm_spike", step, value, msg)
        m = _NAN_LINE.search(line)
        if m is not None:
            return ("nan_inf", self.prev_step, math.nan if m.group(1) == "nan" else math.inf,
                    f"trainer: {m.group(1)} in {m.group(2)}, training terminated")
        return None

    def _record(self, line: str, m: re.Match) -> StepRecord | None:
        epoch, _, step_in_epoch, per_epoch = (int(g) for g in m.groups())
        step = (epoch - 1) * per_epoch + step_in_epoch
        vals = {f.group("key"): f.group("val") for f in _FIELDS.finditer(line, m.end())}
        if "loss" not in vals:
            return None
        steps = step - self.prev_step if 0 < step - self.prev_step <= per_epoch else 1
        self.prev_step = step
        loss = _number(vals["loss"])
        if loss is None:
            return None
        if "per_step_time" in vals:
            step_time = _number(vals["per_step_time"])
        else:
            sink_time = _number(vals.get("time", ""))
            step_time = sink_time / steps if sink_time is not None else None
        overflow = vals.get("overflow cond")
        scale = vals.get("loss_scale")
        return StepRecord(
            step=step, loss=loss, grad_norm=_number(vals["global_norm"]) if "global_norm" in vals else None,
            loss_scale=_number(scale) if scale else None,
            overflow=None if overflow is None else overflow == "True",
            lr=_number(vals["lr"]) if "lr" in vals else None,
            step_time_s=step_time / 1000.0 if step_time is not None else None, steps=steps)
