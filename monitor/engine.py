"""The engine: records and evaluations in, events out. The live callback and ``monitor replay`` both drive this
class."""
from __future__ import annotations

import threading
from collections.abc import Iterable

from .detectors import AT_START, EVALUATORS, SPARED, Judge
from .events import Event
from .log import logger
from .record import StepRecord
from .ruleset import Rules
from .sinks import Sink


class Engine:
    """Runs every enabled detector over one rank's records, in order, and publishes their events.

    Feeding the same records in the same order gives the same events: the engine has no clock and no
    randomness. A record whose step is not after the previous one means the run went back (rollback,
    resume from a checkpoint): the detectors forget what they saw after that step, unless none of the steps
    gone back over raised anything (:class:`~training_monitor.detectors.Judge`).

    Args:
        rules: the rule set (``Rules.load()`` for the defaults).
        sinks: the :class:`~training_monitor.sinks.Sink` objects whose ``on_event`` receives each event
            (event log, metrics, a bounded :class:`~training_monitor.sinks.EventList`, ...); the engine keeps
            none itself. A sink that raises is logged and skipped; it never stops the engine.

    ``offset``: the trainer's step number minus the engine's (0 until a rollback or a resume makes them differ:
    the live callback's rollback rewinds the engine to the checkpoint's step while MindSpore's ``cur_step_num``
    counts on); each event carries the trainer's number then (:attr:`Event.trainer_step`).
    """

    def __init__(self, rules: Rules | None = None, sinks: Iterable[Sink] | None = None):
        self.rules = rules or Rules.load()
        self.judge = Judge(self.rules.detectors(), self.rules.detectors(EVALUATORS))
        self.sinks = list(sinks or [])
        # rule -> (the last step of its cooldown, its last event's value, that event's step)
        self._quiet: dict[str, tuple[int, float, int]] = {}
        self._lock = threading.Lock()  # the watchdog publishes from its own thread
        self.offset = 0

    @property
    def last_step(self) -> int | None:
        """Step of the last record judged (or rewound to); None before the first."""
        return self.judge.last_step

    def observe(self, records, due: int = 0) -> list[Event]:
        """Judge ``records`` and publish what it raised outside each rule's cooldown (or escalated within it:
        a new excursion, its onset after the rule's last event, with a value at least the rule's ``escalation``
        times that event's); return those events (usually none).

        ``records``: one :class:`~training_monitor.record.StepRecord`, or a batch of them read in C (replay's
        :class:`~training_monitor.replay.scan.Batch`), judged from its cursor on up to the first record that
        raised something, went back in steps, or is at step ``due`` or later (the batch then says
        ``stopped``), or to its end; the events are that last record's. ``due``: for a batch only (0: one
        record at a time).
        """
        if records.__class__ is StepRecord:
            hits = self.judge.observe(records)
        else:
            hits = records.judge(self.judge, due)
        if self.judge.went_back:
            self._quiet.clear()
        return [] if hits is None else self._fire(hits, records.step, records.rank)

    def evaluate(self, step: int, loss: float, rank: int = 0) -> list[Event]:
        """Judge an evaluation of rank ``rank``: ``loss``, the evaluation loss (the mean over the evaluation
        set, as the trainer gives it) after training step ``step``, by the evaluation rules
        (:data:`~training_monitor.detectors.EVALUATORS`: ``eval_loss_spike``, ``eval_nan``); publish what they
        raised outside each rule's cooldown, at ``step``, and return those events. Live and replayed evaluations
        come here."""
        hits = self.judge.evaluate(step, loss)
        return [] if hits is None else self._fire(hits, step, rank)

    def _fire(self, hits: list, step: int, rank: int) -> list[Event]:
        fired = []
        for rule, hit in hits:  # (value, onset, message[, actions the event does not ask for])
            value, onset, message = hit[0], hit[1], hit[2]
            until, last, at = self._quiet.get(rule, (-1, 0.0, -1))
            factor = self.rules.rules[rule].escalation
            if step > until or factor and onset > at and last > 0 and value >= factor * last:
                fired.append(self._publish(rule, step, onset, value, message, "rule", rank,
                                           spared=hit[3] if len(hit) > 3 else ()))
        return fired

    def report(self, rule: str, step: int, value: float | None, message: str, rank: int = 0,
               source: str = "trainer", details: str = "", onset: int | None = None, spared=(),
               trainer_step: int | None = None) -> Event:
        """Publish something found outside the detectors (a trainer's log line, the watchdog), under the
        settings of ``rule``; ``onset``: where the excursion began (None or after ``step``: ``step``);
        ``spared``: actions of the rule it does not ask for; ``trainer_step``: the trainer's number of the step
        when known otherwise (a replayed event log's; else from :attr:`offset`). Safe to call from another
        thread."""
        return self._publish(rule, step, step if onset is None else onset, value, message, source, rank, details,
                             spared, trainer_step)

    def rewind(self, step: int) -> None:
        """The run continues from ``step`` (a rollback or a resume): drop later history and cooldowns."""
        self.judge.rewind(step)
        self._quiet.clear()

    def _publish(self, rule, step, onset, value, message, source, rank, details="", spared=(),
                 trainer_step=None) -> Event:
        """Publish an event of ``rule``; ``spared``: actions of the rule it does not ask for (see
        :class:`~training_monitor.detectors.Judge`); an event spared the rollback of a skipped update
        (:data:`~training_monitor.detectors.SPARED`) starts no cooldown, so the event asking for it when the
        excursion goes on is not held back; one in a fresh run's warm-up (:data:`~training_monitor.detectors.AT_START`:
        judged against the few values before, no action asked) is a ``warning`` at most: nothing to page for."""
        cfg = self.rules.rules[rule]
        severity = "warning" if tuple(spared) == AT_START and cfg.severity == "critical" else cfg.severity
        event = Event(rule=rule, step=step, onset_step=min(onset, step), value=value, severity=severity,
                      message=message, source=source, actions=[a for a in cfg.actions if a not in spared], rank=rank,
                      runbook=self.rules.runbook(rule), details=details,
                      trainer_step=trainer_step if trainer_step is not None else step + self.offset if self.offset
                      else None)
        if tuple(spared) != SPARED:  # (a skipped update's event holds back no event of the excursion going on)
            with self._lock:
                self._quiet[rule] = (step + cfg.cooldown_steps, value if value is not None else 0.0, step)
        for sink in self.sinks:
            try:
                sink.on_event(event)
            except Exception as exc:  # a broken sink must not stop detection
                logger.error("event sink {} failed: {!r}", type(sink).__name__, exc)
        return event
