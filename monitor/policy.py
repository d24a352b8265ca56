"""The rollback policy: when a rule asks for a rollback, to which checkpoint, at what learning rate, and when
to stop instead. One implementation for the live callback (:class:`training_monitor.callbacks.TrainingMonitor`, which also
saves and loads the checkpoints) and for replay's would-be rollbacks (:mod:`training_monitor.replay.policy`)."""
from __future__ import annotations

from .events import Event
from .ledger import CheckpointEntry, Ledger


class RollbackPolicy:
    """Decisions over a :class:`~training_monitor.ledger.Ledger` of checkpoints, step by judged step.

    A step whose events hold no rule asking for a rollback (:meth:`rollback_onset` is None) is clean:
    :meth:`clean` promotes the checkpoints that have had ``healthy after`` clean steps since, and
    :meth:`checkpoint_due` says a checkpoint is to be saved every ``checkpoint_every`` steps (0: the
    checkpoints come from elsewhere, or there are none). Otherwise :meth:`anomaly` quarantines the
    checkpoints the onset makes suspect; then :meth:`exhausted` says whether ``max_rollbacks`` rollbacks
    are done already (the run stops instead), :meth:`target` gives the newest healthy checkpoint before
    ``onset - margin``, and :meth:`rolled_back` records the rollback, the LR multiplier scaled by
    ``lr_factor`` each time (so rollbacks compound: 0.5, 0.25, ...).
    """

    def __init__(self, ledger: Ledger, checkpoint_every: int = 0, margin: int = 0, lr_factor: float = 0.5,
                 max_rollbacks: int = 3):
        self.ledger, self.every, self.margin = ledger, checkpoint_every, margin
        self.lr_factor, self.max_rollbacks = lr_factor, max_rollbacks
        self.rollbacks: list[dict] = []
        self.multiplier = 1.0

    @staticmethod
    def rollback_onset(events: list[Event]) -> int | None:
        """Earliest onset among ``events`` whose rule asks for a rollback, or None (a clean step)."""
        onsets = [e.onset_step for e in events if "rollback" in e.actions]
        return min(onsets) if onsets else None

    def clean(self, step: int) -> list[CheckpointEntry]:
        """``step`` was clean: the checkpoints it makes healthy."""
        return self.ledger.observe(step)

    def checkpoint_due(self, step: int) -> bool:
        return bool(self.every) and step % self.every == 0

    def anomaly(self, onset: int) -> None:
        """An excursion began at ``onset``: quarantine the checkpoints not proven before it."""
        self.ledger.anomaly(onset)

    def exhausted(self, step: int) -> str | None:
        """Why a rollback asked for at ``step`` stops the run instead, or None."""
        if len(self.rollbacks) < self.max_rollbacks:
            return None
        return (f"rollback budget exhausted: {len(self.rollbacks)} rollbacks done (max_rollbacks="
                f"{self.max_rollbacks}); anomaly at step {step}")

    def target(self, onset: int) -> CheckpointEntry | None:
        """The newest healthy checkpoint before ``onset - margin``, or None."""
        return self.ledger.rollback_target(onset, self.margin)

    def rolled_back(self, step: int, onset: int, target: CheckpointEntry | None, lr_multiplier: float | None = None,
                    **details) -> dict:
        """Record a rollback at ``step`` to ``target`` (None: not known); the LR multiplier becomes
        ``lr_multiplier`` (what the trainer applied) or the last one times ``lr_factor``. Returns the record
        ``{"at_step", "onset_step", "to_step", "lr_multiplier", **details}``, kept in :attr:`rollbacks`."""
        self.multiplier = self.multiplier * self.lr_factor if lr_multiplier is None else lr_multiplier
        record = {"at_step": step, "onset_step": onset, "to_step": target.step if target is not None else None,
                  "lr_multiplier": self.multiplier, **details}
        self.rollbacks.append(record)
        return record
