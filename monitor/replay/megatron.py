"""Megatron-LM and Megatron-DeepSpeed iteration lines (``training_log`` in ``megatron/training/training.py``,
Megatron-DeepSpeed ``megatron/training.py``), one per ``--log-interval`` iterations, averaged over them::

     iteration      100/    5000 | consumed samples:          800 | elapsed time per iteration (ms): 296.8 | learning rate: 3.937E-06 | global batch size:     8 | lm loss: 9.729805E+00 | loss scale: 131072.0 | grad norm: 5.703 | number of skipped iterations:  16 | number of nan iterations:   0 |
     iteration    29020/  311541 | consumed samples:     10698064 | consumed tokens: 21910659072 | elapsed time per iteration (s): 22.31 | learning rate: 9.850E-05 | global batch size:  1024 | lm loss: 2.775923E+00 | loss scale: 32768.0 | grad norm: 0.000 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 45.906 | TFLOPs: 148.65 |

The record's step is the iteration, ``steps`` the iterations since the line before, ``tokens`` per step from
``consumed tokens`` when printed. The main loss is ``lm loss`` (else the first ``.. loss`` field).

How Megatron prints trouble, and what it becomes here:

* it drops the loss field when the average is NaN (or negative): with ``number of nan iterations`` > 0 the
  line is a ``nan_inf`` report; without (bf16 runs do not skip NaN steps) a record with a NaN loss;
* when every iteration of the interval was skipped the printed loss is 0 (no data), read as unknown;
* a line stands for its whole interval, so ``overflow`` is True only when every iteration of it was skipped
  (no update, no loss), False when none was skipped and the loss scale did not fall, and unknown when the
  interval mixes both: its average loss is still a measurement and is judged. Megatron-DeepSpeed leaves the
  skipping to DeepSpeed and always prints 0 skipped, so a scale lower than the line before also means
  overflows in the interval (a dynamic scale only falls on one); DeepSpeed's own overflow lines, when the
  log has them, are records of their own.

Validation lines (`` validation loss at iteration 1000 | lm loss value: ..``) are skipped as summaries.
"""
from __future__ import annotations

import math
import re

from . import base
from .base import NO_LOSS, NUMBER, SUMMARY, Report, number

NAME = "megatron"

_ITER = re.compile(r"\biteration\s+(\d+)/\s*(\d+)\s*\|")


def detect(line: str) -> bool:
    """True when ``line`` is a Megatron iteration line."""
    return "iteration" in line and "|" in line and _ITER.search(line) is not None


class Parser(base.Parser):
    name = NAME
    messages = True

    def __init__(self, rank: int = 0, times: bool = True):
        super().__init__(rank, times)
        self.iteration, self.scale, self.tokens = 0, None, None  # of the line before

    def parse(self, line):
        if "iteration" not in line or "|" not in line:
            return None
        m = _ITER.search(line)
        if m is None:
            return SUMMARY if "validation loss at" in line else None
        it = int(m.group(1))
        fields = {}
        for part in line[m.end():].split("|"):
            key, sep, value = part.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        try:
            return self._record(it, fields)
        except (ValueError, OverflowError):
            return NUMBER

    def _record(self, it: int, f: dict):
        delta = it - self.iteration if it > self.iteration else 0
        skipped = int(f.get("number of skipped iterations", 0))
        nan = int(f.get("number of nan iterations", 0))
        complete = "number of nan iterations" in f
        ds_overflows, self.overflow_lines = self.overflow_lines, 0
        loss_key = "lm loss" if "lm loss" in f else next((k for k in f if k.endswith(" loss")), None)
        scale = number(f["loss scale"]) if "loss scale" in f else None
        tokens = number(f["consumed tokens"]) if "consumed tokens" in f else None
        prev_scale, prev_tokens, self.scale, self.tokens, self.iteration = self.scale, self.tokens, scale, tokens, it
        if nan:
            return Report("nan_inf", it, math.nan, f"trainer: {nan} iteration(s) with a NaN/Inf loss among the "
                                                   f"{delta or '?'} up to iteration {it} (skipped)", self.rank)
        if loss_key is None and not complete:
            return NO_LOSS
        all_skipped = skipped > 0 and (delta == 0 or skipped >= delta)
        if all_skipped:
            loss = None
        elif loss_key is None:
            loss = math.nan  # Megatron leaves out an average that is NaN
        else:
            loss = number(f[loss_key])
            if loss is None:
                return NUMBER
        fell = scale is not None and prev_scale is not None and scale < prev_scale
        if all_skipped:
            overflow = True
        elif skipped or fell or ds_overflows or "number of skipped iterations" not in f:
            overflow = None  # the interval mixes overflowed and clean iterations (or the line was cut)
        else:
            overflow = False
        ms = number(f.get("elapsed time per iteration (ms)", "")) if "elapsed time per iteration (ms)" in f else None
        secs = number(f.get("elapsed time per iteration (s)", "")) if ms is None else ms / 1000.0
        lr = f.get("learning rate")
        norm = f.get("grad norm")
        return self.record(
            it, loss=loss, grad_norm=number(norm) if norm else None, loss_scale=scale, overflow=overflow,
            lr=number(lr) if lr else None, step_time_s=secs, steps=delta or 1,
            tokens=int((tokens - prev_tokens) / delta) if tokens and prev_tokens and tokens > prev_tokens and delta
            else None)
