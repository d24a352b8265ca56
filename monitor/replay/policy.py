"""What the rollback policy would have done on a logged run: the live monitor's decisions, recorded."""
from __future__ import annotations

from ..ledger import HEALTHY, QUARANTINED, Ledger
from ..policy import RollbackPolicy, RollbackSettings

MAX_CHECKPOINTS = 4096  # ledger entries kept; see WouldBeRollbacks


class WouldBeRollbacks:
    """The decisions of the live policy (:class:`~training_monitor.policy.RollbackPolicy`) on one rank of a log,
    with a checkpoint every ``checkpoint_every`` steps in an in-memory ledger, recorded instead of carried out.

    Each rollback decided becomes a would-be rollback (:attr:`rollbacks`); one with no healthy checkpoint to go
    to is listed in :attr:`missed` and, as live, costs no rollback. A decided stop is :attr:`stop`; later steps
    are not judged. A log of a run that did not roll back goes on after a would-be rollback with the logged
    steps, which the policy takes for the same excursion until the log's steps go back; the record log of a
    monitored run goes back to the checkpoint's step as the live run did, so it gives the live run's
    decisions when given its ``checkpoint_every`` and ``healthy_after``.

    With ``checkpoint_every`` 0 (not known) the target is only bounded: ``to_step`` is None and ``before_step``
    is ``onset - margin``. Memory: at most about :data:`MAX_CHECKPOINTS` ledger entries; past that,
    quarantined entries are dropped and every other one of the older half of the healthy ones.

    Each rollback: ``{"at_step", "onset_step", "to_step", "lr_multiplier", "before_step", "rules"}``; the
    stop: ``{"at_step", "reason"}``; a missed one: ``{"at_step", "onset_step", "before_step", "rules"}``.
    """

    def __init__(self, settings: RollbackSettings | None = None, **fields):
        """``settings``, or its fields as keywords."""
        settings = settings or RollbackSettings(**fields)
        self.policy = RollbackPolicy(Ledger(None, settings.healthy_after), settings)
        self.ledger, self.settings, self.lr_factor = self.policy.ledger, settings, settings.lr_factor
        self.rollbacks = self.policy.rollbacks
        self.missed: list[dict] = []
        self.last_healthy: int | None = None  # newest healthy checkpoint's step

    @property
    def stop(self) -> dict | None:
        return self.policy.stop

    @property
    def due(self) -> int:
        """See :attr:`~training_monitor.policy.RollbackPolicy.due`."""
        return self.policy.due

    def after_step(self, step: int, events: list, went_back: bool = False) -> None:
        """The engine judged ``step`` and raised ``events`` (usually none); ``went_back``: the step is not
        after the one before it (the engine rewound: a real rollback or a resume)."""
        self._record(self.policy.decide(step, events, went_back))

    def after_report(self, event) -> None:
        """A trainer's own report (judged outside the detectors): only a rollback or stop it asks for counts."""
        if "rollback" in event.actions or "stop" in event.actions:
            self._record(self.policy.decide(event.step, [event], judged=False))

    def _record(self, d) -> None:
        if d.promoted:
            top = max(e.step for e in d.promoted)
            self.last_healthy = top if self.last_healthy is None else max(top, self.last_healthy)
        if d.save:
            self.ledger.add(d.step, f"step {d.step}")
            if len(self.ledger.entries) > MAX_CHECKPOINTS:
                self._prune()
        if d.onset is None:
            return
        before = d.onset - self.settings.rollback_margin
        if d.rollback and d.target is None and self.settings.checkpoint_every:
            self.missed.append({"at_step": d.step, "onset_step": d.onset, "before_step": before, "rules": d.rules})
        elif d.rollback:
            self.policy.rolled_back(d, before_step=before)
        self.last_healthy = self.ledger.last_healthy_step

    def _prune(self) -> None:
        entries = [e for e in self.ledger.entries if e.status != QUARANTINED]
        healthy = [e for e in entries if e.status == HEALTHY]
        drop = {id(e) for e in healthy[:len(healthy) // 2:2]}
        self.ledger.entries = [e for e in entries if id(e) not in drop]
