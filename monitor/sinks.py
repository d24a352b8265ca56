"""Where events and records go: the :class:`Sink` protocol and the sinks that are no more than it.

Three callers, three hooks, each a no-op unless a sink overrides it:

* the :class:`~training_monitor.engine.Engine` calls :meth:`Sink.on_event` for each event it publishes (rule
  events, trainer reports, the watchdog's stalls; the last from the watchdog's thread);
* the feed (the live callback, the replay runner) calls :meth:`Sink.on_record` once per judged record, after
  the engine, with the events that record raised;
* the live callback calls :meth:`Sink.on_action` once it has carried out the decision on a step's events
  (what it did, in words: the alert senders need it);

and whoever made a sink calls :meth:`Sink.close` at the end. Implemented by the event log
(:mod:`.eventlog`), the record log (:mod:`.recordlog`), the metrics (:mod:`.metrics`), the OpenMetrics
backfill (:class:`.openmetrics.Feed`), the alert sender (:mod:`.alerts.sender`), :class:`EventList`,
:class:`LoggedEvents` and the replay result.
"""
from __future__ import annotations

from collections.abc import Callable

from .events import Event
from .log import logger
from .record import StepRecord

MAX_EVENTS = 10000  # events an EventList keeps (a replay: per log); later ones are counted, not kept


class Sink:
    """Base of the sinks: every hook does nothing; a sink overrides those it takes."""

    def on_event(self, event: Event) -> None:
        """``event`` was published (the engine's thread, or the watchdog's)."""

    def on_record(self, rec: StepRecord, events: list[Event]) -> None:
        """``rec`` was judged and raised ``events`` (already given to :meth:`on_event`)."""

    def on_action(self, events: list[Event], action: str) -> None:
        """The live callback acted on ``events`` (one step's, or a stall): ``action`` says what it did."""

    def close(self) -> object:
        """No more calls follow: write out what is held, release files, threads and ports. What it returns
        (some sinks give their counters) is the sink's own."""
        return None


def overrides(sink: Sink, hook: str) -> bool:
    """``sink`` does something in ``hook`` (a feed calls only those on its hot path)."""
    return getattr(type(sink), hook) is not getattr(Sink, hook)


class EventList(Sink):
    """The events published, in order, up to ``limit``; later ones are only counted.

    Attributes:
        events: the events kept (at most ``limit``). events_dropped: how many were not kept.
    """

    limit = MAX_EVENTS

    def __init__(self, limit: int = MAX_EVENTS):
        self.events: list[Event] = []
        self.events_dropped = 0
        self.limit = limit

    def on_event(self, event: Event) -> None:
        if len(self.events) < self.limit:
            self.events.append(event)
        else:
            self.events_dropped += 1


class LoggedEvents(Sink):
    """Each event as one log line: an error when the rule is critical, else a warning. Such a line is news,
    not a monitor failure (bound ``report``: strict mode does not raise it). An event with a trainer step
    (:attr:`Event.trainer_step`: the trainer counts its steps on after a rollback) names it too, ``(onset 194;
    trainer step 220)``, so a console log's replay places the event among the trainer's lines. ``own`` (the live
    callback's, under rank consensus): the rank's own values of the step, which the event's (the ranks' mean) do
    not show, as text (``"this rank's own loss nan, grad norm 0.41"``) or ""; each rank's log then says which
    rank's numbers went bad. ``rollback`` False (the live monitor's ``rollback: false``): the rule's
    ``rollback`` action is shown as ``rollback off``, so no line looks like a rollback was done."""

    def __init__(self, own: Callable[[], str] | None = None, rollback: bool = True):
        self.own, self.rollback = own, rollback

    def on_event(self, event: Event) -> None:
        report = logger.bind(report=True)
        log = report.error if event.severity == "critical" else report.warning
        trainer = f"; trainer step {event.trainer_step}" if event.trainer_step is not None else ""
        own = self.own() if self.own is not None else ""
        log("rank {} {} at step {} (onset {}{}): {}{} -> {}", event.rank, event.rule, event.step, event.onset_step,
            trainer, event.message, f" [{own}]" if own else "",
            ", ".join(a if self.rollback or a != "rollback" else "rollback off" for a in event.actions))
