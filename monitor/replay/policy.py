"""What the rollback policy would have done on a logged run: the live monitor's policy, fed the log."""
from __future__ import annotations

from ..ledger import HEALTHY, QUARANTINED, Ledger
from ..policy import RollbackPolicy

MAX_CHECKPOINTS = 4096  # ledger entries kept; see WouldBeRollbacks
FAR = 1 << 62  # a step never reached


class WouldBeRollbacks(RollbackPolicy):
    """The live policy of :class:`training_monitor.callbacks.TrainingMonitor` (:class:`~training_monitor.policy.RollbackPolicy`) on one
    rank of a log, with a checkpoint every ``checkpoint_every`` steps in an in-memory ledger.

    Checkpoints turn healthy after ``healthy_after`` clean steps and are quarantined on the onset of a rule
    that asks for a rollback. Each such event becomes a would-be rollback (:attr:`rollbacks`) to the newest
    healthy checkpoint before ``onset - margin``, with the LR multiplier scaled by ``lr_factor``; with none, it
    is listed in :attr:`missed` and, as live, costs no rollback. The rollback after ``max_rollbacks``, or a
    rule with the ``stop`` action, would have stopped the run (:attr:`stop`); later steps are not judged.

    A log of a run that did not roll back goes on after a would-be rollback with the logged steps, which the
    rolled-back run would not have had: an event whose onset is not after the last would-be rollback's step
    (the same excursion firing again) asks for no further rollback until the log's steps go back. The record
    log of a monitored run goes back to the checkpoint's step as the live run did, so it gives the live run's
    decisions when given its ``checkpoint_every`` and ``healthy_after``.

    With ``checkpoint_every`` 0 (not known) the target is only bounded: ``to_step`` is None and ``before_step``
    is ``onset - margin``. Memory: at most about :data:`MAX_CHECKPOINTS` ledger entries; past that,
    quarantined entries are dropped and every other one of the older half of the healthy ones.

    Each rollback: ``{"at_step", "onset_step", "to_step", "lr_multiplier", "before_step", "rules"}``; the
    stop: ``{"at_step", "reason"}``; a missed one: ``{"at_step", "onset_step", "before_step", "rules"}``.
    """

    def __init__(self, checkpoint_every: int = 0, healthy_after: int = 20, margin: int = 0,
                 lr_factor: float = 0.5, max_rollbacks: int = 3):
        super().__init__(Ledger(None, healthy_after), checkpoint_every, margin, lr_factor, max_rollbacks)
        self.missed: list[dict] = []
        self.stop: dict | None = None
        self.last_healthy: int | None = None  # newest healthy checkpoint's step
        self._last_step: int | None = None  # step of the last after_step
        self._rolled_back_at: int | None = None  # step of the last would-be rollback, until the log goes back

    def after_step(self, step: int, events: list, went_back: bool = False) -> None:
        """The engine judged ``step`` and raised ``events`` (usually none); ``went_back``: the step is not
        after the one before it (the engine rewound: a real rollback or a resume)."""
        if self.stop is not None:
            return
        if went_back:
            self._rolled_back_at = None
        self._last_step = step
        self._judge(step, events, clean_step=True)

    @property
    def due(self) -> int:
        """The first step whose :meth:`after_step` without events, not going back, would change anything (a
        checkpoint to add or to promote); a feed may leave out such calls for the steps before it (replay's
        compiled fast path, :mod:`.scan`). Before the first step: every step is due."""
        if self.stop is not None or not self.every:
            return FAR
        if self._last_step is None:
            return -FAR
        nxt = (self._last_step // self.every + 1) * self.every
        promote = self.ledger.next_promotion
        return nxt if promote is None else min(nxt, promote)

    def after_report(self, event) -> None:
        """A trainer's own report (judged outside the detectors): only a rollback or stop it asks for counts."""
        if self.stop is None and ("rollback" in event.actions or "stop" in event.actions):
            self._judge(event.step, [event], clean_step=False)

    def _judge(self, step: int, events: list, clean_step: bool) -> None:
        onset = self.rollback_onset(events) if events else None
        if onset is None:
            if clean_step:
                promoted = self.clean(step)
                if promoted:
                    top = max(e.step for e in promoted)
                    self.last_healthy = top if self.last_healthy is None else max(top, self.last_healthy)
                if self.checkpoint_due(step):
                    self.ledger.add(step, f"step {step}")
                    if len(self.ledger.entries) > MAX_CHECKPOINTS:
                        self._prune()
        else:
            if self._rolled_back_at is not None and onset <= self._rolled_back_at:
                self.anomaly(onset)  # the excursion already rolled back, firing again
            else:
                self._rollback(step, onset, events)
            self.last_healthy = self.ledger.last_healthy_step
        if self.stop is None and any("stop" in e.actions for e in events):
            self.stop = {"at_step": step, "reason": f"rule {events[0].rule} asks to stop at step {step}"}

    def _rollback(self, step: int, onset: int, events: list) -> None:
        self.anomaly(onset)
        rules = sorted({e.rule for e in events if "rollback" in e.actions})
        reason = self.exhausted(step)
        if reason:
            self.stop = {"at_step": step, "reason": reason}
            return
        target = self.target(onset) if self.every else None
        if self.every and target is None:
            self.missed.append({"at_step": step, "onset_step": onset, "before_step": onset - self.margin,
                                "rules": rules})
            return
        self._rolled_back_at = step
        self.rolled_back(step, onset, target, before_step=onset - self.margin, rules=rules)

    def _prune(self) -> None:
        entries = [e for e in self.ledger.entries if e.status != QUARANTINED]
        healthy = [e for e in entries if e.status == HEALTHY]
        drop = {id(e) for e in healthy[:len(healthy) // 2:2]}
        self.ledger.entries = [e for e in entries if id(e) not in drop]
