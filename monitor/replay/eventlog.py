"""This project's own event log (``events_rank<r>.jsonl``, written by :class:`training_monitor.eventlog.EventLog`), one
event per line, re-reported with its rule, step, onset, value, message, rank, source and trainer step::

    {"rule": "loss_spike", "step": 151, "onset_step": 151, "value": 4.28, "severity": "critical", "message": "loss 4.28 at step 151 ..", "source": "rule", "actions": ["alert", "rollback"], "rank": 0, "runbook": "runbooks/loss_spike.md", "details": "", "time": 1714550400.1}

The action records of the same log (``{"action": "rollback", ..}``: what the live monitor did) are listed in
words (:func:`training_monitor.eventlog.said`, the result's ``actions``), not judged.
Severity and actions come from the rules in force, less the actions the logged event did not ask for (the live
monitor spares a rollback for an event on steps whose update was skipped).
"""
from __future__ import annotations

import json

from ..detectors import ACTIONS, EVALUATORS
from ..eventlog import said
from ..sinks import MAX_EVENTS
from . import base
from .base import ACTION, MAX_ACTIONS, NOT_JSON, NUMBER, Report


def json_object(line: str) -> dict | None:
    s = line.strip()
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None

NAME = "events"
SPARABLE = tuple(a for a in ACTIONS if a != "alert")  # what an event asks beyond its alert


def spared(asked: list) -> tuple:
    """The actions beyond its alert that an event which asked for ``asked`` did not ask for (Report.spared)."""
    return tuple(a for a in SPARABLE if a not in asked)


def detect(line: str) -> bool:
    """True when ``line`` is an event of the monitor's event log."""
    if '"onset_step"' not in line:
        return False
    obj = json_object(line)
    return obj is not None and "rule" in obj and "onset_step" in obj


def _value(v) -> float | None:
    return None if v is None else float(v)  # NaN/Inf are written as "nan"/"inf"


def beside(path: str, events: int = MAX_EVENTS, actions: int = MAX_ACTIONS) -> tuple[list, list[str]]:
    """What the event log ``path`` adds to the record log beside it, read in one pass: the events the live monitor
    found outside the step records (source other than ``rule``: the weights check's, the watchdog's; the evaluation
    rules' events, :data:`EVALUATORS`: a record log holds no evaluation), each as ``(time in Unix seconds,
    Report)``, and what it did (its action records: rollbacks, stops) in words
    (:func:`training_monitor.eventlog.said`); each in the file's order, the first ``events`` and ``actions`` of
    them (memory stays bounded). Other lines (the step rules' events, broken lines) are left out; a file that
    cannot be read raises OSError."""
    found: list[tuple[float, Report]] = []
    done: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if len(found) >= events and len(done) >= actions:
                break
            obj = json_object(line) if '"onset_step"' in line or '"action"' in line else None
            if obj is None:
                continue
            if "action" in obj and "rule" not in obj:
                if len(done) < actions:
                    done.append(said(obj))
            elif len(found) < events and (obj.get("source", "rule") != "rule" or obj.get("rule") in EVALUATORS) and (
                    '"onset_step"' in line and isinstance(obj.get("time"), (int, float))):
                rep = _report(obj, 0)
                if isinstance(rep, Report):
                    found.append((float(obj["time"]), rep))
    return found, done


def _report(obj: dict, rank: int) -> Report | str:
    """The event ``obj`` (an event log line's object) as a :class:`Report` (``rank``: when it names none), or the
    reason it is not one."""
    if "rule" not in obj:
        return ACTION if "action" in obj else base.NO_STEP
    try:
        step, onset = int(obj["step"]), int(obj.get("onset_step", obj["step"]))
        value = _value(obj.get("value"))
        rank = int(obj.get("rank", rank))
        trainer = None if obj.get("trainer_step") is None else int(obj["trainer_step"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return NUMBER
    asked = obj.get("actions")
    return Report(str(obj["rule"]), step, value, str(obj.get("message", "")), rank, onset,
                  str(obj.get("source", "rule")), str(obj.get("details", "")),
                  spared(asked) if isinstance(asked, list) else (), trainer)


class Parser(base.Parser):
    name = NAME

    def parse(self, line):
        obj = json_object(line)
        if obj is None:
            return NOT_JSON if line.strip() else base.BLANK
        if "action" in obj and "rule" not in obj:  # what the live monitor did
            self.action = said(obj)
        return _report(obj, self.rank)
