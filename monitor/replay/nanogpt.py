"""nanoGPT-style training scripts.

* karpathy/nanoGPT ``train.py`` (``print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu
  {running_mfu*100:.2f}%")``; the MFU is -100% until it is first measured, read as unknown)::

      iter 100: loss 2.4213, time 152.31ms, mfu 31.20%

* KellerJordan/modded-nanogpt record scripts (``train_gpt2.py``: ``step:{step+1}/{num_iterations}
  train_loss:.. train_time:{ms:.0f}ms step_avg:{ms:.2f}ms``; the step time is the difference of the running
  ``train_time`` between lines)::

      step:10/3200 train_loss:7.1234 train_time:1234ms step_avg:123.40ms

Evaluation lines (``step 500: train loss 2.1, val loss 2.3``, ``step:125/3200 val_loss:4.2 ..``) are skipped as
summaries; newer modded-nanogpt lines with no train loss (``step:10/3200 train_time:..``) as lines without
loss. The step is the number printed.
"""
from __future__ import annotations

import re

from . import base
from .base import NO_LOSS, NUMBER, SUMMARY, number

NAME = "nanogpt"

_ITER = re.compile(r"\s*iter (\d+): loss (\S+), time ([\d.]+)ms(?:, mfu (-?[\d.]+)%)?")
_STEP = re.compile(r"\s*step:(\d+)/\d+ (\w+):(\S+)(?: train_time:([\d.]+)ms)?")


def detect(line: str) -> bool:
    """True when ``line`` is a nanoGPT or modded-nanogpt training-loss line."""
    return (line.lstrip().startswith("iter ") and _ITER.match(line) is not None) or \
        ("train_loss:" in line and _STEP.match(line) is not None)


class Parser(base.Parser):
    name = NAME
    messages = True

    def __init__(self, rank: int = 0, times: bool = True):
        super().__init__(rank, times)
        self.train_ms = None  # modded-nanogpt's running train_time at the line before

    def parse(self, line):
        m = _ITER.match(line)
        if m is not None:
            loss, ms = number(m.group(2)), number(m.group(3))
            if loss is None or ms is None:
                return NUMBER
            mfu = number(m.group(4)) if m.group(4) else None
            return self.record(int(m.group(1)), loss=loss, step_time_s=ms / 1000.0,
                               mfu=mfu / 100.0 if mfu is not None and mfu >= 0 else None)
        m = _STEP.match(line)
        if m is not None:
            step, key = int(m.group(1)), m.group(2)
            if key == "val_loss":
                return SUMMARY
            if key != "train_loss":
                return NO_LOSS
            loss, total = number(m.group(3)), number(m.group(4)) if m.group(4) else None
            if loss is None:
                return NUMBER
            prev, self.train_ms = self.train_ms, total
            gap = step - self.step
            step_time = ((total - prev) / gap / 1000.0 if total is not None and prev is not None and total >= prev
                         and gap > 0 else None)
            return self.record(step, loss=loss, step_time_s=step_time)
        if line.startswith("step ") and "val loss" in line:
            return SUMMARY
        return None
