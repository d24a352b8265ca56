"""The run's record stream as CSV: one row per step record, columns named as :class:`StepRecord` fields.

``monitor replay`` reads it back (format ``csv``), so a live run can be replayed offline through the same
rules and gives the same events.
"""
from __future__ import annotations

import os
from dataclasses import fields

from .log import logger
from .record import StepRecord

FIELDS = [f.name for f in fields(StepRecord)]  # the column order RecordLog.write formats


def _cell(value) -> str:
    return "" if value is None else value if isinstance(value, str) else repr(value)


class RecordLog:
    """Appends records to a CSV file (header written when the file is new).

    Writes go through a buffered file and are flushed every ``flush_every`` rows and at :meth:`close`,
    so a step costs a string format and a buffer append. A write failure is logged once and the log
    stops; training never sees it.
    """

    def __init__(self, path: str, flush_every: int = 100):
        self.path, self.flush_every, self._rows = path, flush_every, 0
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            new = not os.path.exists(path) or os.path.getsize(path) == 0
            self._f = open(path, "a", buffering=1 << 16)
            if new:
                self._f.write(",".join(FIELDS) + "\n")
        except OSError as exc:
            logger.error("record log {} cannot be opened ({}); the run is not recorded", path, exc)
            self._f = None

    def write(self, rec: StepRecord) -> None:
        if self._f is None:
            return
        r = rec
        try:  # missing values are empty cells; repr keeps floats exact
            self._f.write(",".join(map(_cell, (r.step, r.loss, r.grad_norm, r.loss_scale, r.overflow, r.lr,
                                               r.step_time_s, r.data_wait_s, r.tokens, r.rank, r.timestamp,
                                               r.steps, r.mfu, r.slow_reason))) + "\n")
            self._rows += 1
            if self._rows % self.flush_every == 0:
                self._f.flush()
        except OSError as exc:
            logger.error("record log {} write failed ({}); recording stops", self.path, exc)
            self._f = None

    def close(self) -> None:
        if self._f is not None:
            try:
                self._f.close()
            except OSError as exc:
                logger.error("record log {} close failed ({})", self.path, exc)
            self._f = None
