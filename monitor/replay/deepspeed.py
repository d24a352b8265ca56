"""A DeepSpeed engine's own log, with no trainer step lines: its fp16 overflow messages (records, see
:mod:`.messages`) and its progress line every ``steps_per_print`` steps (``deepspeed/runtime/engine.py``,
``_report_progress``, through ``log_dist`` which adds ``[Rank 0]``)::

    [2023-04-28 06:59:46,878] [INFO] [logging.py:96:log_dist] [Rank 0] step=510, skipped=8, lr=[2.9e-05], mom=[(0.9, 0.999)]

A progress line is a record at its step with the learning rate and no loss; ``overflow`` is False when no
step was skipped since the progress line before (so the loss-scale calibration is over), else unknown (the
overflowed steps are the overflow records). Overflow records take the steps after the last progress line.

This is the fallback format: chosen when no other format has lines in the file, so it also reads a log that
holds only trainer messages (NCCL/HCCL timeouts). Every other text format reads DeepSpeed's messages too.
"""
from __future__ import annotations

import re

from . import base, messages
from .base import number

NAME = "deepspeed"
FALLBACK = True

_PROGRESS = re.compile(r"\bstep=(\d+), skipped=(\d+), lr=\[([^\],]*)")


def detect(line: str) -> bool:
    """True when ``line`` is a DeepSpeed progress line or may hold a trainer message (:mod:`.messages`)."""
    return messages.mentioned(line) or "step=" in line and _PROGRESS.search(line) is not None


class Parser(base.Parser):
    name = NAME
    messages = True

    def __init__(self, rank: int = 0, times: bool = True):
        super().__init__(rank, times)
        self.skipped = None  # DeepSpeed's skipped count at the progress line before

    def parse(self, line):
        if "step=" not in line:
            return None
        m = _PROGRESS.search(line)
        if m is None:
            return None
        step, skipped = int(m.group(1)), int(m.group(2))
        clean = skipped == (self.skipped or 0)
        self.skipped = skipped
        if step <= self.step:
            return base.PROGRESS
        return self.record(step, lr=number(m.group(3)), overflow=False if clean else None)
