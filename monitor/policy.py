"""The rollback policy: one decision path for the live callback and for replay's would-be rollbacks.

:meth:`RollbackPolicy.decide` takes a judged step's events and returns a :class:`Decision` (nothing, save a
checkpoint, roll back to a target from an onset, skip batches, stop), after promoting and quarantining the
checkpoints of its ledger. The live callback (:class:`training_monitor.callbacks.TrainingMonitor`) carries the
decision out (save, restore, skip, stop) and reports back what it did (:meth:`~RollbackPolicy.rolled_back`,
:meth:`~RollbackPolicy.failed`, :meth:`~RollbackPolicy.next_target`); replay (:mod:`training_monitor.replay.policy`)
records it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .events import Event
from .ledger import DELETED, QUARANTINED, CheckpointEntry, Ledger

FAR = 1 << 62  # a step never reached


@dataclass
class RollbackSettings:
    """When checkpoints are trusted and how a rollback is done. The live monitor's settings
    (:class:`~training_monitor.config.MonitorConfig`), replay's (:class:`~training_monitor.replay.runner.ReplayOptions`)
    and ``monitor replay``'s options are made from it; each field's ``metadata`` gives its
    ``doc`` and bounds (``min``, ``max``; ``min_open``: the minimum itself is excluded)."""

    checkpoint_every: int = field(default=0, metadata={
        "doc": "a checkpoint is saved every N steps (0: live, only ModelCheckpoint files; replayed, not known: "
               "the target is only bounded)", "min": 0})
    healthy_after: int = field(default=20, metadata={
        "doc": "clean steps after a checkpoint before it counts as healthy", "min": 0})
    rollback_margin: int = field(default=0, metadata={
        "doc": "the target checkpoint is at least this many steps before the onset", "min": 0})
    lr_factor: float = field(default=0.5, metadata={
        "doc": "the learning rate is multiplied by this at each rollback (0 < f <= 1)", "min": 0, "max": 1,
        "min_open": True})
    max_rollbacks: int = field(default=3, metadata={
        "doc": "rollback budget: one more rollback asked for stops the run (also the most bad batches in a "
               "row undone on a checkpoint's own weights)", "min": 0})


@dataclass(slots=True)
class Decision:
    """What to do after judged step ``step``.

    ``save``: save a checkpoint of the state after ``step``. ``onset``: the earliest onset of an event whose
    rule asks for a rollback (None: a clean step); ``rollback``: roll back now, to ``target`` (the newest
    healthy checkpoint before ``onset - margin``; None: there is none), the LR multiplier becoming
    ``lr_multiplier``; ``rules``: the rules asking. ``skip``: batches to skip ahead of the data reader (the
    ``skip_batches`` action). ``stop``: stop the run, for this reason. ``promoted`` / ``quarantined``: the
    checkpoints this step made healthy / suspect. ``batch``: the rollback undoes a batch's update, not the
    trajectory (see :class:`RollbackPolicy`): the LR multiplier stays.
    """

    step: int
    save: bool = False
    onset: int | None = None
    rollback: bool = False
    target: CheckpointEntry | None = None
    lr_multiplier: float = 1.0
    rules: Sequence = ()
    skip: int = 0
    stop: str | None = None
    promoted: Sequence = ()
    quarantined: Sequence = ()
    batch: bool = False


class RollbackPolicy:
    """Decisions over a :class:`~training_monitor.ledger.Ledger` of checkpoints, step by judged step.

    A step whose events hold no rule asking for a rollback is clean: it promotes the checkpoints that have
    had ``healthy_after`` clean steps since, and a checkpoint is due every ``checkpoint_every`` steps.
    Otherwise the checkpoints the onset makes suspect are quarantined, and a rollback is decided to the
    newest healthy checkpoint before ``onset - rollback_margin``, with the LR multiplier scaled by
    ``lr_factor`` (rollbacks compound: 0.5, 0.25, ...), unless ``rollback`` is off, ``max_rollbacks`` are
    done already (the run stops instead), or the run did not go back since the last rollback and the onset
    is within ``healthy_after`` steps of the last step that asked for one (the same excursion firing again
    on a log of a run that did not roll back: a loss still up fires again once the rule's cooldown is over,
    at a later onset). An anomaly on the first step after the run went back to a checkpoint (a rollback, a
    resume) whose target is that same checkpoint ran on that checkpoint's own weights: its batch is bad, not the
    trajectory (a burst of corrupt samples asks for one rollback per bad batch); it rolls back again without
    another LR cut and without counting against the budget, up to ``max_rollbacks`` such batches in a row (one
    more stops the run: the data is bad). A rule with
    the ``stop`` action stops the run. After a stop, nothing more is decided.

    Args:
        ledger: the checkpoints.
        settings: :class:`RollbackSettings`.
        rollback: False: anomalies quarantine checkpoints but ask for no rollback.
        on_failed_rollback: ``stop`` or ``continue`` when a decided rollback cannot be done (:meth:`failed`).
        skip_extra: rule -> batches its ``skip_batches`` action skips (``skip_extra_batches``).
        before_target: called before a rollback target is chosen (the live callback checks which checkpoint
            files still exist).
    """

    def __init__(self, ledger: Ledger, settings: RollbackSettings | None = None, rollback: bool = True,
                 on_failed_rollback: str = "stop", skip_extra: dict | None = None, before_target=None):
        self.ledger, self.settings, self.rollback = ledger, settings or RollbackSettings(), rollback
        self.on_failed_rollback, self.before_target = on_failed_rollback, before_target
        self.skip_extra = skip_extra or {}
        self.rollbacks: list[dict] = []  # {"at_step", "onset_step", "to_step", "lr_multiplier", "rules", **details}
        self.earlier = 0  # rollbacks done before a restart, on the way to the checkpoint resumed from (:meth:`carry`)
        self.multiplier = 1.0
        self.stop: dict | None = None  # {"at_step", "reason"}
        self.last_step: int | None = None  # the last judged step decided
        # a run that did not go back since its last rollback: the last step of the excursion (the last that asked
        # for a rollback); None once the run goes back
        self._excursion_to: int | None = None
        self._batches = 0  # bad batches in a row on a checkpoint's own weights (Decision.batch)

    def decide(self, step: int, events: list[Event], went_back: bool = False, judged: bool = True) -> Decision:
        """The decision after ``step`` raised ``events`` (usually none). ``went_back``: the step is not after the
        one before it (a rollback or a resume); ``judged``: False for a trainer's own report (not a step of
        its own: it makes nothing clean, only a rollback or stop it asks for counts)."""
        d = Decision(step)
        if self.stop is not None:
            return d
        if went_back:
            self._excursion_to = None
            self.ledger.proven_to = step - 1
        if judged:
            self.last_step = step
        onsets = [e.onset_step for e in events if "rollback" in e.actions] if events else None
        s = self.settings
        if not onsets:
            if judged:
                d.promoted = self.ledger.observe(step)
                d.save = bool(s.checkpoint_every) and step % s.checkpoint_every == 0
            if not events:
                return d
        else:
            d.onset = onset = min(onsets)
            d.quarantined = self._anomaly(onset)
            to = self._excursion_to
            if to is not None and onset <= to + s.healthy_after:
                self._excursion_to = step  # the same excursion goes on
            elif self.rollback:
                if self.before_target is not None:
                    self.before_target()
                target = self.ledger.rollback_target(onset, s.rollback_margin)
                # (ledger.proven_to: the step of the checkpoint the run last went back to)
                batch = target is not None and target.step == self.ledger.proven_to and onset == target.step + 1
                self._batches *= batch  # (a rollback of the trajectory ends a streak of bad batches)
                if batch and self._batches >= s.max_rollbacks:
                    d.stop = (f"{self._batches + 1} batches in a row were anomalous on the weights of the healthy "
                              f"checkpoint of step {self.ledger.proven_to}: the data is bad (max_rollbacks="
                              f"{s.max_rollbacks}); anomaly at step {step}")
                elif not batch and self.done >= s.max_rollbacks:
                    d.stop = (f"rollback budget exhausted: {self.done} rollbacks done (max_rollbacks="
                              f"{s.max_rollbacks}); anomaly at step {step}{self._recurring(onset, events)}")
                else:
                    d.rollback, d.target, d.batch = True, target, batch
                    d.lr_multiplier = self.multiplier * (1.0 if batch else s.lr_factor)
                    d.rules = sorted({e.rule for e in events if "rollback" in e.actions})
        d.skip = max((self.skip_extra.get(e.rule, 0) for e in events if "skip_batches" in e.actions), default=0)
        if d.stop is None and any("stop" in e.actions for e in events):
            d.stop = f"rule {events[0].rule} asks to stop at step {step}"
        if d.stop is not None:
            self.stop = {"at_step": step, "reason": d.stop}
        return d

    def _recurring(self, onset: int, events) -> str:
        """What the budget's stop adds about this process's rollbacks of the trajectory: the rules and onsets
        of each; when every one came within ``healthy_after`` steps of ``onset`` (the anomaly back where it was,
        on a lower LR each time), that it follows the run's path, which a rollback replays."""
        done = [r for r in self.rollbacks if not r.get("batch")]
        if not done:
            return ""
        rules = ", ".join(sorted({e.rule for e in events if "rollback" in e.actions}))
        seen = "; ".join(f"onset {r['onset_step']} ({', '.join(r.get('rules') or ['?'])})" for r in done)
        text = f" ({rules}, onset {onset}); the rollbacks before: {seen}"
        if all(abs(r["onset_step"] - onset) <= self.settings.healthy_after for r in done):
            text += (f"; the anomaly came back at the same steps at each lower LR (now x{self.multiplier:g}): it "
                     "follows the run's path, its LR schedule or the data at those steps, which a rollback replays")
        return text

    @property
    def done(self) -> int:
        """Rollbacks done in the run: before a restart (:attr:`earlier`) and in this process, but for those that
        undid a bad batch (:attr:`Decision.batch`)."""
        return self.earlier + sum(not r.get("batch") for r in self.rollbacks)

    def carry(self, entry: CheckpointEntry) -> None:
        """Take up a run resumed from the checkpoint ``entry``: the run went back to its step, as a rollback goes
        back to its target (a healthy one is proven by the steps after it before the restart, not by those done
        again: ``ledger.proven_to``); the rollbacks done before its save count against the budget, and the next
        rollback's multiplier compounds on the LR multiplier they left."""
        self.earlier, self.multiplier = entry.rollbacks, entry.lr_multiplier
        self.ledger.proven_to = entry.step

    def _anomaly(self, onset: int) -> list[CheckpointEntry]:
        """Quarantine the checkpoints not proven before ``onset``; return them."""
        live = [e for e in self.ledger.entries if e.status not in (QUARANTINED, DELETED)]
        self.ledger.anomaly(onset)
        return [e for e in live if e.status == QUARANTINED]

    def next_target(self, d: Decision, reason: str) -> CheckpointEntry | None:
        """``d.target`` failed to load: quarantine it (with ``reason``) and return the next target, also set in
        ``d`` (None: none is left)."""
        assert d.target is not None and d.onset is not None, "a rollback decision has a target and an onset"
        self.ledger.quarantine(d.target, reason)
        d.quarantined = [*d.quarantined, d.target]
        d.target = self.ledger.rollback_target(d.onset, self.settings.rollback_margin)
        return d.target

    def rolled_back(self, d: Decision, rewound: bool = False, **details) -> dict:
        """The rollback ``d`` was done (or, replayed, would have been), to ``d.target`` (None: not known).
        ``rewound``: the run went back to the target (live), so a later onset before ``d.step`` is a new
        excursion; else the next steps are the same run's until a step goes back, and events on them are the same
        excursion until ``healthy_after`` steps pass with none asking for a rollback. Returns the record
        ``{"at_step", "onset_step", "to_step", "lr_multiplier", "rules", **details}``, kept in :attr:`rollbacks`."""
        self.multiplier = d.lr_multiplier
        self._excursion_to = None if rewound else d.step
        if rewound and d.target is not None:
            self.ledger.proven_to = d.target.step
        self._batches += d.batch
        record = {"at_step": d.step, "onset_step": d.onset, "to_step": d.target.step if d.target is not None else None,
                  "lr_multiplier": d.lr_multiplier, "rules": d.rules, **({"batch": True} if d.batch else {}),
                  **details}
        self.rollbacks.append(record)
        return record

    def failed(self, d: Decision, reason: str) -> bool:
        """The rollback ``d`` could not be done (``reason``; it does not count against the budget). True when
        the run stops then (``on_failed_rollback: stop``; ``d.stop`` gives the reason), False when it goes on."""
        if self.on_failed_rollback != "stop":
            return False
        if d.stop is None:
            d.stop = f"rollback failed at step {d.step}: {reason}"
            self.stop = {"at_step": d.step, "reason": d.stop}
        return True

    @property
    def due(self) -> int:
        """The first step whose :meth:`decide` without events, not going back, would change anything (a
        checkpoint to save or to promote); a feed may leave out such calls for the steps before it (replay's
        compiled fast path). Before the first step: every step is due."""
        every = self.settings.checkpoint_every
        if self.stop is not None or not every:
            return FAR
        if self.last_step is None:
            return -FAR
        nxt = (self.last_step // every + 1) * every
        promote = self.ledger.next_promotion
        return nxt if promote is None else min(nxt, promote)

