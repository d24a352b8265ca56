"""The JSONL event log (``events_rank<r>.jsonl``): one JSON object per line, appended."""
from __future__ import annotations

import json
import os
import time

from .events import Event
from .files import open_append
from .log import logger
from .sinks import Sink


class EventLog(Sink):
    """Append-only JSONL file of events, one object per line: a sink (each event, with its ``time``) and the
    record of what the monitor did (:meth:`write`: rollbacks, skips, stops).

    Each event is written with a single ``os.write`` on an ``O_APPEND`` descriptor, so a line is never
    interleaved with another writer's or left half-written by this process. Failures (disk full,
    permissions) are logged once and the event is kept in memory (:attr:`unwritten`), never raised. A write
    after :meth:`close` (an evaluation reported after the training call returned) opens the file for that write.
    """

    def __init__(self, path: str):
        self.path = path
        self.unwritten: list[dict] = []
        self._fd: int | None = None
        self._failed = False  # opening or writing failed: events are kept in memory until the next open()
        self.open()

    def open(self) -> None:
        """Open the file for appending (again after :meth:`close`: a monitor's next ``Model.train`` call)."""
        if self._fd is not None:
            return
        try:
            self._fd, self._failed = open_append(self.path), False
        except OSError as exc:
            self._failed = True
            logger.error("event log {} cannot be opened ({}); events are kept in memory", self.path, exc)

    def on_event(self, event: Event) -> None:
        self.write({**event.to_dict(), "time": time.time()})

    def write(self, record: dict) -> None:
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        once = self._fd is None and not self._failed  # closed: open for this write alone
        if once:
            self.open()
        if self._fd is not None:
            try:
                os.write(self._fd, line)
                return
            except OSError as exc:
                logger.error("event log {} write failed ({}); events are kept in memory", self.path, exc)
                self._failed = True
                self.close()
            finally:
                if once:
                    self.close()
        self.unwritten.append(record)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def said(record: dict, rank: bool = True) -> str:
    """An action record of the event log (what the monitor did: ``{"action": "rollback", ..}``, written by the
    MindSpore callback) in words, as the monitor's own log line says it: ``rank 0: rolled back from step 151 to
    healthy checkpoint at step 125 (ckpt/x.ckpt), LR x0.5 (now x0.5 of the schedule)`` (``rank`` False: without
    the ``rank 0: ``, as a chat alert that names the rank says it). A record of an action this version does not
    know, or one missing a field, is given as its fields (``name: key value, ..``)."""
    r = record
    try:
        who = f"rank {r['rank']}: " if rank and "rank" in r else ""
        act = r["action"]
        if act == "rollback":
            lr = (f"LR kept at x{r['lr_multiplier']:g} of the schedule: step {r['onset_step']} ran on that "
                  "checkpoint's own weights, its batch is bad" if r.get("batch") else
                  f"LR x{r['lr_scale']:g} (now x{r['lr_multiplier']:g} of the schedule)")
            skipped = r.get("skipped_batches")
            return (f"{who}rolled back from step {r['at_step']} to healthy checkpoint at step {r['to_step']} "
                    f"({r['checkpoint']}), {lr}"
                    f"{f'; batches {skipped[0]}-{skipped[1]} of the data are not seen again' if skipped else ''}")
        if act == "rollback_failed":
            return f"{who}step {r['at_step']}: rollback failed ({r['reason']}); training went on"
        if act == "skip_batches":
            first, last = r["source_positions"]
            return (f"{who}skipped {r['batches']} batch(es), data source positions {first}-{last}, at step "
                    f"{r['at_step']}")
        if act == "stop":
            return f"{who}stopped the run: {r['reason']}"
        if act == "resume_failed":
            return f"{who}resume from {r['checkpoint']} failed: {r['reason']}"
    except (KeyError, TypeError, ValueError, IndexError):
        pass
    return f"{r.get('action')}: " + ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("action", "time"))
