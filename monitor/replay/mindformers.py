"""MindFormers ``MFLossMonitor`` logs, every line shape of its published versions
(``mindformers/core/callback/callback.py``, ``print_output_info``, tags v0.6 to v1.7 and dev).

Step lines:

* v0.6 (mid-2023), ``time`` per sink call (per step = time / steps since the last line)::

      Epoch:[  1/  1], step:[    4/  125], loss:[2.244/2.244], time:507844.205 ms, lr:[0.], overflow cond: True, loss_scale: 268435460.0

* 0.8 to dev, sink mode ``loss: x``, non-sink ``loss:[x/mean]``, ``global_norm`` from 1.3, throughput from
  1.5, ``lm_loss``/``mtp_loss`` parts from 1.7 (ignored)::

      { Epoch:[  1/  2], step:[    1/   19], loss: 10.649, per_step_time: 103328ms, lr: 0.0, overflow cond: False, loss_scale: 1.0, global_norm: [1 31049], train_throughput_per_npu: 2.896T

  with the published quirks ``global_norm [x]`` (no colon) and a non-scalar norm ``[1 31049]`` (kept as
  unknown); any prefix (file handler ``[INFO] date [file:line] func:``, console ``date - [file:line] - INFO -``,
  a bare ``- INFO -``).

Other lines: the progress line after each step line (``  0.0% |   | 0.00600 samples/s/p  25 days, 2:07:47 }``,
skipped as a progress bar); the sink's summary after its step line (``Per sink_size step time: .. ms, per step
time: .. ms, avg loss: ..``), whose per-step time completes the step's record (skipped as a summary when its
step line is not in the log); global-norm data skipping's ``opt_global_step: 0, skip_data_grad_norm_threshold:
3.0, is_skip: [ True]`` after a step line, which drops that step's loss (the ``loss: 0.000`` printed for a
skipped batch is no loss).

What the trainer reports itself becomes an event: its global-norm threshold line (``Current global norm
[44.313248] of step 1 has been 1 consecutive times greater than threshold: 3.0``, a ``grad_norm_spike``), the
``ValueError`` that stops the run on it, and its NaN/Inf termination in each version's words (``The current
value of loss is NaN, terminate training.``, ``loss is nan, terminate training.``, ``There is nan in loss with
value nan, terminate training.``, ``device_accum_local_loss is .., loss is nan, .., terminate training.``).
"""
from __future__ import annotations

import math
import re

from . import base
from .base import MERGED, NO_LOSS, NUMBER, PROGRESS, SUMMARY, Report, number

try:
    from .scan import fast_record
except ImportError:  # not built: the general reader reads every line
    fast_record = None

NAME = "mindformers"

_STEP = re.compile(r"Epoch:\[\s*(\d+)/\s*(\d+)\],\s*step:\[\s*(\d+)/\s*(\d+)\]")
_FIELDS = re.compile(
    r"\b(?P<key>loss|per_step_time|time|lr|overflow cond|loss_scale|global_norm|train_throughput_per_npu)\b"
    r"\s*:?\s*(?P<val>\[[^\]]*\]|[^,\s]+(?:\s*ms)?)")
_NORM_LINE = re.compile(r"Current global norm \[([^\]]*)\] of step (\d+) has been (\d+) consecutive times greater "
                        r"than threshold:? ?([\d.eE+-]+)(.*)")
_SINK_STEP_TIME = re.compile(r"per step time: ([\d.]+) ms")
_SKIP = re.compile(r"is_skip: \[?\s*(True|False)")
_NAN = re.compile(r"There is (nan|inf) in (\w+)|(\w+) is \[?(-?(?:nan|inf))\b", re.IGNORECASE)


def detect(line: str) -> bool:
    """True when ``line`` is an ``MFLossMonitor`` step line."""
    return "step:[" in line and "loss" in line and _STEP.search(line) is not None


class Parser(base.Parser):
    name = NAME
    messages = True
    summarized = None  # the step whose sink summary was read

    def parse(self, line):
        if fast_record is not None:
            rec = fast_record(line, self.last, self.rank)  # the 1.3+ line as printed, read in C
            if rec is not None:
                return rec
        if "step:[" in line:
            m = _STEP.search(line)
            if m is not None:
                return self._record(line, m)
        if "samples/s/p" in line:
            return PROGRESS
        if "consecutive times greater" in line:
            m = _NORM_LINE.search(line)
            if m is not None:
                value, step = number(m.group(1)), int(m.group(2))
                stopped = "stop training" in m.group(5) or line.lstrip().startswith("ValueError")
                return Report("grad_norm_spike", step, value,
                              f"trainer: global norm {m.group(1)} above its threshold {m.group(4)} {m.group(3)} "
                              f"consecutive time(s) at step {step}" + ("; training stopped" if stopped else ""),
                              self.rank)
        if "terminate training" in line:
            m = _NAN.search(line)
            if m is not None:
                word, what = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
                value = -math.inf if word.startswith("-") else math.nan if "nan" in word.lower() else math.inf
                return Report("nan_inf", self.step, value,
                              f"trainer: {word.lower()} in {what}, training terminated", self.rank)
        if "Per sink_size step time" in line:  # the sink's summary: its per-step time is MindFormers' own...
            m = _SINK_STEP_TIME.search(line)
            if m is None or self.last is None or self.last.step == self.summarized:
                return SUMMARY  # ...unless the step line before it is not in the log (an excerpt)
            self.summarized = self.last.step
            return self.merge(step_time_s=float(m.group(1)) / 1000.0)
        if "is_skip:" in line:
            m = _SKIP.search(line)
            if m is not None and self.last is not None:  # global-norm data skipping: the batch was dropped
                if m.group(1) == "True":
                    self.last.loss = None  # and "loss: 0.000" printed for it is no loss
                return MERGED
        return None

    def _record(self, line: str, m: re.Match):
        epoch, _, step_in_epoch, per_epoch = m.groups()
        per_epoch = int(per_epoch)
        step = (int(epoch) - 1) * per_epoch + int(step_in_epoch)
        gap = step - self.step
        steps = gap if 0 < gap <= per_epoch else 1
        vals = {f.group("key"): f.group("val") for f in _FIELDS.finditer(line, m.end())}
        if "loss" not in vals:
            return NO_LOSS
        loss = number(vals["loss"])
        if loss is None:
            return NUMBER
        if "per_step_time" in vals:
            step_time = number(vals["per_step_time"])
        else:
            sink_time = number(vals.get("time", ""))
            step_time = sink_time / steps if sink_time is not None else None
        overflow = vals.get("overflow cond")
        scale = vals.get("loss_scale")
        return self.record(
            step, loss=loss, grad_norm=number(vals["global_norm"]) if "global_norm" in vals else None,
            loss_scale=number(scale) if scale else None,
            overflow=None if overflow is None else overflow == "True",
            lr=number(vals["lr"]) if "lr" in vals else None,
            step_time_s=step_time / 1000.0 if step_time is not None else None, steps=steps)
