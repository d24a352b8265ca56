"""The time a log line was written, read from its prefix (the one place replay reads wall-clock times), and the
hangs those times show (:class:`Silence`).

Prefixes read, within the first 64 characters of the line::

    2025-04-07 15:34:27,308 - [mindformers/core/callback/callback.py:529] - INFO - { Epoch:...   (MindFormers console)
    [INFO] 2025-04-07 15:34:27,308 [mindformers/core/callback/callback.py:529] print_output_info: ...  (its file)
    [2024-05-30 10:21:44] iteration      100/ ...                                        (Megatron-LM since 2024)
    [2023-04-12 10:53:24,519] [INFO] [logging.py:96:log_dist] [Rank 0] step=...            (DeepSpeed)
    [WARNING] ME(2134:281473,MainProcess):2025-04-07-15:34:27.308.123 [...]                 (MindSpore)

Logs print local time without a zone: it is read in this process's local time zone (set ``TZ`` to the zone
the training machine used, e.g. ``TZ=UTC``).
"""
from __future__ import annotations

import itertools
import re
import time
from collections import deque

from ..watchdog import allowance

# a line saying a checkpoint save begins (torchtitan's ``Saving the checkpoint``, MMEngine's ``Saving checkpoint at
# 100 iterations``, MindYOLO's ``Saving model to``, MindFormers' ``......Saving ckpt......``, DeepSpeed's ``Checkpoint
# global_step100 is about to be saved!``); ``Saved ..``, ``Finished saving ..`` say it is done
SAVING = re.compile(r"(?i)(?<!finished )(?<!done )\bsav(?:e|es|ing)\b\W+(?:\w+\W+){0,3}?"
                    r"(?:checkpoint|ckpt|model|weights)\b|checkpoint\b.{0,60}\bis about to be saved")
# a line of an evaluation (a word for one, or a metric evaluations report: EFNet's ``Validation debug, # psnr: ..``,
# arcface_torch's ``[lfw][26000]Accuracy-Flip: ..``, ``Test 00001088: 100%|..``, a detector's ``Image Total P R mAP``
# table and ``AP: 0.0073``, COCO's ``AP50``; the precision metrics in capitals only: ``map`` and ``ap`` are words)
EVALUATING = re.compile(r"(?i)\b(?:eval\w*|valid\w*|test(?:ing)?|accuracy|top-?[15]|psnr|bleu"
                        r"|(?-i:m?AP)(?:\d*|@\S*))\b")
# a date-time, the date ISO's or with slashes (PaddlePaddle's ``[2022/10/08 04:06:38]``), the time to the second
_TIME = re.compile(r"(\d{4}([-/])\d\d\2\d\d)[ T-](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")
# the last (date, hour) converted and its Unix time: lines come in order
_last: tuple[tuple[str, str] | None, float] = (None, 0.0)


def stamp_end(line: str) -> int:
    """Where the date-time :func:`line_time` reads in ``line`` ends, 0 when it has none."""
    m = _TIME.search(line, 0, 64)
    return 0 if m is None else m.end()


def stamped(line: str) -> bool:
    """``line`` starts with a date-time :func:`line_time` reads (its digits may be any: a line's shape)."""
    return stamp_end(line) > 0


def line_time(line: str) -> float | None:
    """Unix time (seconds) of the date-time at the start of ``line``, or None when it has none."""
    m = _TIME.search(line, 0, 64)
    if m is None:
        return None
    date, sep, hour, minute, second, frac = m.groups()
    global _last
    key, start = _last
    if key != (date, hour):
        y, mo, d = date.split(sep)
        try:
            start = time.mktime((int(y), int(mo), int(d), int(hour), 0, 0, 0, 0, -1))
        except (OverflowError, ValueError):
            return None
        _last = ((date, hour), start)
    return start + int(minute) * 60 + int(second) + (float("0." + frac) if frac else 0.0)


class Silence:
    """A hang seen in a log's line times, judged as the live watchdog judges the clock (the ``stall`` rule's
    ``factor``, ``min_seconds``, ``startup_seconds``, ``startup_steps``; :func:`~training_monitor.watchdog.allowance`).

    The step period is the median time between the lines of consecutive step records (the last 50 pairs; after
    the first 50, one pair in :data:`SAMPLE`); start-up follows the trainer's step numbers (a log starting at step
    17060 is past it). Progress is the time of the last step record's line, or of the first line with a time
    after it when that line has none. :meth:`idle` on a later line that is not a step record gives the seconds
    of silence once they pass the allowance (once per silence), else None; after a line saying a checkpoint save
    begins (:meth:`busy`, :data:`SAVING`), a line of an evaluation within the allowance (:data:`EVALUATING`) or an
    evaluation's result at any time (the silence before it was the evaluation running), the allowance is at least
    the start-up one until the next step record,
    as the live watchdog's during a save (:meth:`~training_monitor.watchdog.Watchdog.busy`). A line of an
    evaluation with no time of its own (:meth:`unseen`, :attr:`hidden`) ran somewhere in the silence, for as long
    as the line times cannot tell: the reader waits for what follows (``text.Parser.deferred``). Times are read only
    when needed (the sampled pairs' when the allowance is, or when :data:`PENDING` wait).
    """

    SAMPLE = 16
    PENDING = 1024  # sampled pairs of lines kept unread at most

    def __init__(self, params: dict):
        self.params = (params["factor"], params["min_seconds"], params["startup_seconds"], params["startup_steps"])
        self.periods: deque[float] = deque(maxlen=50)
        self.pending: list[tuple[str, str]] = []  # the sampled pairs of lines after the periods, not read yet
        self.step: int | None = None  # of the last step record
        self.line = ""  # the last step record's line
        self.since: float | None = None  # time of the last progress (None: not read yet)
        self.count = 0
        self.allowed = 0.0  # the allowance the last silence passed
        self.fired = False
        self.slow = False  # a checkpoint save began since the last step record
        self.hidden = False  # an evaluation line with no time came since the last step record (see unseen)

    def record(self, step: int, line: str) -> None:
        """A step record's line."""
        self.count += 1
        if self.count <= 50 or self.count % self.SAMPLE == 0:
            self._sampled(self.line, line)
        self.record_at(step, line)

    def record_at(self, step: int, line: str) -> None:
        """Progress at a step record's ``line``: a new silence begins."""
        self.step, self.line, self.since, self.fired, self.slow, self.hidden = step, line, None, False, False, False

    def busy(self) -> None:
        """A line says a checkpoint save begins, or an evaluation runs."""
        self.slow = True

    def unseen(self) -> None:
        """A line of an evaluation with no time of its own came in this silence (:attr:`hidden`)."""
        self.hidden = True

    def took(self, count: int, step: int, line) -> None:
        """``count`` step records in a row, the last at ``step``, as :meth:`record` of each; ``line(i)``: the i-th's
        line (read only where a period is sampled)."""
        first = self.count + 1
        self.count += count
        low = max(first, 51)
        for c in itertools.chain(range(first, min(self.count, 50) + 1),
                                 range(low + (-low) % self.SAMPLE, self.count + 1, self.SAMPLE)):
            i = c - first
            self._sampled(line(i - 1) if i else self.line, line(i))
        self.record_at(step, line(count - 1))

    def _sampled(self, before: str, line: str) -> None:
        self.pending.append((before, line))
        if len(self.pending) == self.PENDING:
            self._settle()

    def _settle(self) -> None:
        """Read the pending pairs' periods (the time between the two lines, when both have one and it is > 0) into
        the window, from the last back until it is full: the ones before would leave it."""
        kept: list[float] = []
        for before, line in reversed(self.pending):
            then, now = line_time(before), line_time(line)
            if then is not None and now is not None and now > then:
                kept.append(now - then)
                if len(kept) == self.periods.maxlen:
                    break
        self.periods.extend(reversed(kept))
        self.pending.clear()

    def idle(self, line: str) -> float | None:
        """Seconds since the last progress at ``line`` (not a step record's), when they exceed the allowance."""
        if self.fired or self.step is None:
            return None
        at = line_time(line)
        if at is None:
            return None
        if self.since is None:
            self.since = line_time(self.line)
        if self.since is None or at < self.since:
            self.since = at
            return None
        idle = at - self.since
        if self.pending:
            self._settle()
        self.allowed = allowance(self.step, self.periods, *self.params, busy=self.slow)
        if idle > self.allowed:
            self.fired = True
            return idle
        return None
