"""MindSpore's own training callbacks (``mindspore/python/mindspore/train/callback/``).

* ``LossMonitor`` (``_loss_monitor.py``), one line per printed step; the step is counted within the epoch,
  so the global step adds the last step printed in each earlier epoch::

      epoch: 1 step: 10, loss is 2.3025851

* its NaN/Inf stop, a ``nan_inf`` report (old and new wording)::

      ValueError: epoch: 1 step: 10. Invalid loss, terminating training.
      ValueError: In epoch: 1 step: 10, loss is NAN or INF, training process cannot continue, terminating training.

* ``TimeMonitor`` (``_time_monitor.py``) at each epoch end (a sink in sink mode), added to the step printed
  before it (per step time, and the data time as the data wait)::

      epoch time: 1234.567 ms, per step time: 123.457 ms
      Train epoch time: 1234.567 ms, per step time: 123.457 ms (data time: 1.234 ms)

* ``FlopsUtilizationCollector`` (``_flops_collector.py``), its MFU added to the step printed before it, in
  each version's words::

      Train epoch time: 271.144 ms, per step time: 135.572 ms, mfu:0.47% hfu:0.47%
      time_monitor{type="per_step_time"} 135.572 1714550400123 mfu:0.47% hfu:0.47%
      Train per step time: 135.572 ms mfu:0.47% hfu:0.47%

Evaluation timings (``Eval epoch time: ..``) and results (``Eval result: epoch 1, metrics: ..``) are skipped as
summaries.
"""
from __future__ import annotations

import math
import re

from . import base
from .base import NUMBER, SUMMARY, Report, number

NAME = "mindspore"

_LOSS = re.compile(r"epoch: (\d+) step: (\d+), loss is (.*)")
_TENSOR_VALUE = re.compile(r"value=\s*\[?\s*([^\s\]),]+)")
_INVALID = re.compile(r"epoch: (\d+) step: (\d+)[.,] (?:Invalid loss|loss is NAN or INF)")
_STEP_TIME = re.compile(r"per step time: ([\d.]+) ms(?: \(data time: ([\d.]+) ms\))?")
_TIME_MONITOR = re.compile(r'time_monitor\{type="per_step_time"\} ([\d.eE+-]+)')
_MFU = re.compile(r"\bmfu:([\d.]+)%")


def detect(line: str) -> bool:
    """True when ``line`` is a ``LossMonitor`` step line."""
    return "loss is" in line and _LOSS.search(line) is not None


class Parser(base.Parser):
    name = NAME
    messages = True

    def __init__(self, rank: int = 0, times: bool = True):
        super().__init__(rank, times)
        self.epoch, self.offset, self.in_epoch = 0, 0, 0  # current epoch, steps before it, its last step

    def _global(self, epoch: int, step_in_epoch: int) -> int:
        if epoch > self.epoch:
            if self.epoch:
                self.offset += (epoch - self.epoch) * self.in_epoch
            self.epoch = epoch
        elif epoch < self.epoch:  # a new run in the same log
            self.epoch, self.offset = epoch, 0
        self.in_epoch = max(self.in_epoch, step_in_epoch)
        return self.offset + step_in_epoch

    def parse(self, line):
        if "terminating training" in line:
            m = _INVALID.search(line)
            if m is not None:
                step = self._global(int(m.group(1)), int(m.group(2)))
                return Report("nan_inf", step, math.nan, f"trainer: loss is NaN or Inf at step {step}, training "
                                                         "terminated", self.rank)
        if "loss is" in line:
            m = _LOSS.search(line)
            if m is not None:
                text = m.group(3)
                v = _TENSOR_VALUE.search(text) if "value=" in text else None
                loss = number(v.group(1) if v else text.split()[0] if text.split() else "")
                if loss is None:
                    return NUMBER
                return self.record(self._global(int(m.group(1)), int(m.group(2))), loss=loss)
        if "per step time" in line or "time_monitor{" in line or "mfu:" in line:
            if line.lstrip().startswith("Eval"):
                return SUMMARY
            t, tm, mfu = _STEP_TIME.search(line), _TIME_MONITOR.search(line), _MFU.search(line)
            if t is None and tm is None and mfu is None:
                return None
            step_ms = number(t.group(1)) if t else number(tm.group(1)) if tm else None
            wait_ms = number(t.group(2)) if t and t.group(2) else None
            pct = number(mfu.group(1)) if mfu else None
            return self.merge(step_time_s=step_ms / 1000.0 if step_ms is not None else None,
                              data_wait_s=wait_ms / 1000.0 if wait_ms is not None else None,
                              mfu=pct / 100.0 if pct is not None else None)
        if line.startswith("Eval result:"):
            return SUMMARY
        return None
