"""The run's record stream as CSV: one row per step record, columns named as :class:`StepRecord` fields.

``monitor replay`` reads it back (format ``csv``), so a live run can be replayed offline through the same
rules and gives the same events; a resumed run re-reads it to restore the detectors (:mod:`training_monitor.resume`).
"""
from __future__ import annotations

import os
import time
from dataclasses import fields
from operator import attrgetter

from .files import open_append
from .log import logger
from .record import StepRecord
from .sinks import Sink

FIELDS = [f.name for f in fields(StepRecord)]  # the column order RecordLog.write formats
_ROW = attrgetter(*FIELDS)  # a record's values in that order (one C call)
_HEADER = (",".join(FIELDS) + "\n").encode()


def _cell(value) -> str:
    return "" if value is None else value if isinstance(value, str) else repr(value)


class RecordLog(Sink):
    """A sink that appends the records to a CSV file; the header is written at once when the file is new.

    Rows wait in memory and go to the file in one ``os.write`` of whole lines on an ``O_APPEND``
    descriptor when ``flush_rows`` rows are waiting, when ``flush_seconds`` have passed since the last
    write to the file (checked at each row), and at :meth:`flush` and :meth:`close`. So a kill -9 loses at
    most the rows of the last ``flush_rows - 1`` steps (fewer on slow steps) and never leaves half a row; a
    step costs a string format and a list append. A write failure is logged once and the log stops;
    training never sees it.
    """

    def __init__(self, path: str, flush_rows: int = 10, flush_seconds: float = 1.0):
        self.path, self.flush_rows, self.flush_seconds = path, flush_rows, flush_seconds
        self._rows: list[str] = []
        self._last = time.monotonic()
        self._fd: int | None = None
        self.start = self.open() or 0  # where this process's rows begin

    @property
    def inherited(self) -> bool:
        """The file held an earlier process's rows when this log first opened it."""
        return self.start > len(_HEADER)

    def open(self) -> int | None:
        """Open the file for appending (again after :meth:`close`: a monitor's next ``Model.train`` call).
        Returns its size (where the next row goes); None when it is open already or cannot be opened."""
        if self._fd is not None:
            return None
        try:
            self._fd = open_append(self.path)
            size = os.fstat(self._fd).st_size
            if size == 0:
                os.write(self._fd, _HEADER)
            else:
                with open(self.path, "rb") as f:  # a machine crash may have cut the last row: start a new line
                    f.seek(size - 1)
                    if f.read(1) != b"\n":
                        os.write(self._fd, b"\n")
            return os.fstat(self._fd).st_size
        except OSError as exc:
            logger.error("record log {} cannot be opened ({}); the run is not recorded", self.path, exc)
            self._fd = None
            return None

    def on_record(self, rec: StepRecord, events=()) -> None:
        """Append ``rec``'s row (``events`` are not recorded here: the event log has them)."""
        if self._fd is None:
            return
        # missing values are empty cells; repr keeps floats exact
        self._rows.append(",".join(map(_cell, _ROW(rec))) + "\n")
        if len(self._rows) >= self.flush_rows or time.monotonic() - self._last >= self.flush_seconds:
            self.flush()

    def flush(self) -> int | None:
        """Write the waiting rows; return the file's size after them (the offset where the next row starts),
        or None when the log is not written."""
        if self._fd is None:
            return None
        try:
            if self._rows:
                os.write(self._fd, "".join(self._rows).encode())
                self._rows.clear()
            self._last = time.monotonic()
            return os.fstat(self._fd).st_size
        except OSError as exc:
            logger.error("record log {} write failed ({}); recording stops", self.path, exc)
            os.close(self._fd)
            self._fd = None
            return None

    def sync(self) -> int | None:
        """:meth:`flush`, then fsync (the rows survive a machine crash too); returns what flush returns."""
        offset = self.flush()
        if offset is not None and self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                logger.error("record log {} not synced ({})", self.path, exc)
        return offset

    def close(self) -> None:
        if self._fd is not None and self.flush() is not None:
            os.close(self._fd)
            self._fd = None
