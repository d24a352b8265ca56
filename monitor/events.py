"""Anomaly events: what a rule (or the trainer itself) reports. Written by :mod:`training_monitor.eventlog`."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


def json_value(value: float | None):
    """``value`` as JSON can hold it: None, a finite number, or NaN/Inf as its text (``"nan"``, ``"inf"``)."""
    return value if value is None or math.isfinite(value) else str(value)


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
        source: ``rule`` (computed by this engine), ``watchdog`` (the live hang watchdog), ``trainer`` (read
            from the trainer's own log line) or ``monitor`` (found by the live monitor outside its rules, the
            weights check before a checkpoint is promoted; or this monitor's own event line, read back from the
            console log of a monitored run).
        actions: actions the rules file attaches to this rule (``alert``, ``rollback``, ``stop``).
        rank: rank whose record triggered it.
        runbook: link to the rule's runbook (``runbooks/<rule>.md`` under the configured base).
        details: longer evidence (the thread stacks of a ``stall``), empty for most events.
        trainer_step: the trainer's own number of ``step`` when it differs from the monitor's (after a rollback,
            MindSpore's ``cur_step_num``, which ``LossMonitor`` and ``MFLossMonitor`` print, counts on), else None.
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
    trainer_step: int | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["value"] = json_value(self.value)
        return d
