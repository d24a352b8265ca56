"""Anomaly events and the JSONL event log."""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field

from .log import logger

@dataclass(slots=True)
class Event:
    """One rule firing (or one thing the trainer itself reported).

    Attributes:
        rule: rule id (``nan_inf``, ``loss_spike``, ``grad_norm_spike``, ``overflow_storm``).
        step: step at which the anomaly was detected.
        onset_step: step where the excursion began (<= ``step``); a rollback goes to before it.
        value: the offending value (loss, grad norm, overflow count...); NaN/Inf kept as such.
        severity: ``warning`` or ``critical``.
        message: one human sentence.
        source: ``rule`` (computed by this engine) or ``trainer`` (read from the trainer's own log line).
        actions: actions the rules file attaches to this rule (``alert``, ``rollback``, ``stop``).
        rank: rank whose record triggered it.
        runbook: link to the rule's runbook (``runbooks/<rule>.md`` under the configured base).
        details: longer evidence (the thread stacks of a ``stall``), empty for most events.
    """

    rule: str
    step: int
    onset_step: int
    value: float | None
    severity: str
    message: str
    source: str = "rule"
    actions: list[str] = field(default_factory=list)
    rank: int = 0
    runbook: str = ""
    details: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        v = self.value
        d["value"] = v if v is None or math.isfinite(v) else str(v)  # JSON has no NaN/Inf
        return d


class EventLog:
    """Append-only JSONL file of events, one object per line.

    Each event is written with a single ``os.write`` on an ``O_APPEND`` descriptor, so a line is never
    interleaved with another writer's or left half-written by this process. Failures (disk full,
    permissions) are logged once and the event is kept in memory (:attr:`unwritten`), never raised.
    """

    def __init__(self, path: str):
        self.path = path
        self.unwritten: list[dict] = []
        self._fd: int | None = None
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            logger.error("event log {} cannot be opened ({}); events are kept in memory", path, exc)

    def write(self, record: dict) -> None:
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        if self._fd is not None:
            try:
                os.write(self._fd, line)
                return
            except OSError as exc:
                logger.error("event log {} write failed ({}); events are kept in memory", self.path, exc)
                os.close(self._fd)
                self._fd = None
        self.unwritten.append(record)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
