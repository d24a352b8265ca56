"""Hugging Face ``Trainer`` logs (``src/transformers/trainer_callback.py``: ``ProgressCallback.on_log`` writes
``str(logs)`` through the tqdm bar, ``PrinterCallback`` prints it)::

    {'loss': 2.0491, 'grad_norm': 1.234, 'learning_rate': 0.0001961913563176343, 'epoch': 0.28}

between tqdm progress bars (``tqdm(total=state.max_steps)``, one update per optimizer step)::

     14%|█▍        | 380/2724 [14:02:33<86:01:24, 132.12s/it]

HF does not print the step with the loss. The step is the training bar's count when bars are in the log
(the first bar's total tells the training bar from evaluation bars), else the count of loss lines. Bars
are separated by carriage returns, which the reader splits into lines; a DeepSpeed overflow message
printed right after a bar on the same line belongs to the step after the bar's count.

Lines without ``'loss'`` (``{'eval_loss': ..}``, the final ``{'train_runtime': .., 'train_loss': ..}``) are
skipped as summaries. Values may be ``nan``/``inf`` or a printed tensor (``tensor(1.5, device='cuda:0')``).
"""
from __future__ import annotations

import re

from . import base
from .base import NO_LOSS, NUMBER, PROGRESS, SUMMARY, number
from .fields import canonical

NAME = "hf"

_PAIR = re.compile(r"'([^']+)':\s*(tensor\([^)]*\)|[^,}]+)")
_BAR = re.compile(r"\|\s*(\d+)/(\d+)\s*\[")


def detect(line: str) -> bool:
    """True when ``line`` is a Trainer log dict with a loss."""
    return "{'" in line and "'loss':" in line


class Parser(base.Parser):
    name = NAME
    messages = True

    def __init__(self, rank: int = 0, times: bool = True):
        super().__init__(rank, times)
        self.bar, self.bar_total = 0, None  # training bar's count and total

    def next_step(self) -> int:
        return max(self.bar, self.step) + 1

    def parse(self, line):
        if "%|" in line:
            bars = list(_BAR.finditer(line))
            if bars:
                n, total = int(bars[-1].group(1)), int(bars[-1].group(2))
                self.bar_total = self.bar_total or total
                if total == self.bar_total:
                    self.bar = n
                return None if "kipping step" in line[bars[-1].end():] else PROGRESS
        start = line.find("{'")
        if start < 0:
            return None
        pairs = {canonical(k): v for k, v in _PAIR.findall(line, start)}
        if "loss" not in pairs:
            return SUMMARY if pairs else NO_LOSS
        if "train_runtime" in pairs:
            return SUMMARY
        loss = number(pairs["loss"])
        if loss is None:
            return NUMBER
        if self.bar > self.step:
            step = self.bar
        elif self.bar and self.bar == self.step and self.last is not None and self.last.loss is None:
            return self.merge(loss=loss, grad_norm=number(pairs.get("grad_norm", "")), lr=number(pairs.get("lr", "")))
        else:
            step = self.step + 1
        return self.record(step, loss=loss, grad_norm=number(pairs.get("grad_norm", "")),
                           lr=number(pairs.get("lr", "")))
