"""What the rollback policy would have done on a logged run: the live monitor's ledger, fed the log."""
from __future__ import annotations

from ..engine import Engine
from ..ledger import Ledger


class WouldBeRollbacks:
    """Replays the live policy on a log: checkpoints every ``checkpoint_every`` steps go into a
    :class:`~monitor.ledger.Ledger` (in memory) that turns healthy after ``healthy_after`` clean steps and
    is quarantined by the onset of a rule that asks for a rollback, exactly as in
    :class:`callbacks.TrainingMonitor`; each such event becomes a would-be rollback to the newest healthy
    checkpoint at least ``margin`` steps before its onset, with the LR multiplier scaled by ``lr_factor``;
    past ``max_rollbacks`` the run would have been stopped. The logged run did not roll back, so the
    steps after a would-be rollback are the logged ones.

    With ``checkpoint_every`` 0 (not known) the target is only bounded: ``to_step`` is None and
    ``before_step`` is ``onset - margin``.
    """

    def __init__(self, checkpoint_every: int = 0, healthy_after: int = 20, margin: int = 0,
                 lr_factor: float = 0.5, max_rollbacks: int = 3):
        self.every, self.margin, self.lr_factor, self.max_rollbacks = checkpoint_every, margin, lr_factor, max_rollbacks
        self.ledger = Ledger(None, healthy_after)
        self.rollbacks: list[dict] = []
        self.stop: dict | None = None
        self._multiplier = 1.0

    def after_step(self, step: int, events: list) -> None:
        """The engine judged ``step`` and raised ``events`` (usually none)."""
        if self.stop is not None:
            return
        onset = Engine.rollback_onset(events)
        if onset is None:
            self.ledger.observe(step)
            if self.every and step % self.every == 0:
                self.ledger.add(step, f"step {step}")
            return
        self.ledger.anomaly(onset)
        if len(self.rollbacks) >= self.max_rollbacks:
            self.stop = {"at_step": step, "reason": f"rollback budget exhausted: {len(self.rollbacks)} rollbacks "
                                                    f"(max_rollbacks={self.max_rollbacks})"}
            return
        target = self.ledger.rollback_target(onset, self.margin) if self.every else None
        self._multiplier *= self.lr_factor
        self.rollbacks.append({"at_step": step, "onset_step": onset, "to_step": target.step if target else None,
                               "before_step": onset - self.margin, "lr_multiplier": self._multiplier,
                               "rules": sorted({e.rule for e in events if "rollback" in e.actions})})
