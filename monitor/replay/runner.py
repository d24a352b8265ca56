"""Read logs, pick their format, feed step records, evaluations and trainer reports to one
:class:`~training_monitor.engine.Engine` per rank.

Every line read is counted once: as a step record, an evaluation, a trainer report, a line merged into the step
record before it, or a skipped line under its reason. Each judged record then goes, per rank, to the would-be
rollback policy (:mod:`.policy`), to the log's step-time/TPS/MFU quantiles (:mod:`.tracks`), and, when asked for, to
the plot series of the HTML report and to the OpenMetrics backfill (:mod:`training_monitor.openmetrics`). Memory
stays bounded whatever the input size: lines are streamed, and a result keeps counts, the events (it is the engines'
sink, up to :data:`~training_monitor.sinks.MAX_EVENTS`), bounded samples and the last record.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..detectors import decimals
from ..engine import Engine
from ..log import logger
from ..policy import FAR, RollbackSettings
from ..record import StepRecord
from ..ruleset import Rules
from ..sinks import EventList
from . import csvlog, eventlog, mindformers, tensorboard
from . import text as generic
from .base import (
    ACTION,
    DUPLICATE,
    MAX_ACTIONS,
    MERGED,
    PROGRESS,
    REJUDGED,
    RULE_DISABLED,
    UNKNOWN_RULE,
    Evaluation,
    Report,
)
from .policy import WouldBeRollbacks
from .progress import EVERY, Progress
from .sources import (
    MAX_RANKS,
    STDIN,
    Source,
    SourceError,
    default_run,
    expand,
    first_bytes,
    open_bytes,
    rank_of,
    shown,
    text,
    text_lines,
)
from .summary import count
from .tracks import Stats, Track

# the generic text reader (.text) reads every text log no other format claims; the others need more than it
PARSERS = {m.NAME: m for m in (mindformers, generic, csvlog, eventlog, tensorboard)}
DETECT_LINES = 5000
HELD = 1000  # records whose step is their position, held until the log names a step (bounded memory)

NOT_SLOWER = "slowness report the step times do not show"  # (_Run._confirm)


def _period(rec: StepRecord) -> float:
    """``rec``'s step period in seconds: its step time and data wait."""
    return (rec.step_time_s or 0.0) + (rec.data_wait_s or 0.0)


# the prefix torchrun --tee puts on every line of worker N ([default3]:, [rank3]: since PyTorch 2.2): one log per
# worker, interleaved. "[rank3]:" on some lines only (PyTorch's C++ warnings and errors amid a worker's own lines)
# is a decoration: it names the rank when it leads most of the lines that vote for a format (detect)
_RANK_PREFIX = re.compile(r"\[(?:default|rank)(\d+)\]:")
_RANK_STARTS = ("[default", "[rank")

try:
    from .scan import Batch, TextBatch
except ImportError as exc:  # not built (no C compiler): every line through its format's parser
    Batch, TextBatch = None, None
    _NOT_BUILT = f"replay's compiled reader is not built ({exc}): reading line by line, slower"


class ReplayError(Exception):
    """A log that cannot be replayed; the message names the file (and line) and the reason."""


@dataclass
class ReplayOptions(RollbackSettings):
    """What a replay does besides judging (``monitor replay``'s options), shared by all the logs of one replay.

    The :class:`~training_monitor.policy.RollbackSettings` (``checkpoint_every`` 0: not known): the would-be
    rollback policy's (:class:`~.policy.WouldBeRollbacks`), defaults as the live monitor's. ``plot_ranks``: keep
    plot series (bounded) for this many ranks, all logs together, for the HTML report (0: none). ``openmetrics``: an
    :class:`~training_monitor.openmetrics.OpenMetricsWriter` to feed, labelled ``run`` (None: each log's file name
    stem). ``progress``: a :class:`~.progress.Progress` to move while reading, or None. ``fast``: read through
    the compiled readers (of MindFormers step lines, and of the text reader's plain step lines through their
    shape's recipe; the text reader's other plain step lines through it in Python): the same results; False:
    every line through the format's parser, in full.
    ``block_bytes``: bytes the compiled reader reads at a time (its memory, besides the longest line).
    """

    plot_ranks: int = 0
    openmetrics: Any = None
    run: str | None = None
    progress: Progress | None = None
    fast: bool = True
    block_bytes: int = 1 << 18
    plotted: int = 0  # ranks given plot series so far

    def policy(self) -> WouldBeRollbacks:
        return WouldBeRollbacks(self)


@dataclass
class ReplayResult(EventList):
    """Outcome of one log: counts, the engines' events (the result is their sink: the first
    :data:`~training_monitor.sinks.MAX_EVENTS`, the others counted in ``events_dropped``), and the last record.

    Counts: ``steps`` (step records, what the rules judged), ``evaluations`` (evaluation records: lines read as
    an evaluation loss and no step record; a step line that also names one counts as a step), ``merged_lines``
    (lines whose values went into the step record before them), ``reports`` (trainer reports), ``skipped_lines``;
    :attr:`records` the log's records read, :attr:`lines` every line."""

    path: str
    format: str
    steps: int = 0
    evaluations: int = 0
    skipped_lines: int = 0
    events: list = field(default_factory=list)
    last: StepRecord | None = None
    reports: int = 0
    merged_lines: int = 0
    glued: int = 0  # items a line gave after its first (a trainer message glued after a bar's record)
    skipped: Counter = field(default_factory=Counter)
    ranks: set = field(default_factory=set)
    events_dropped: int = 0
    files: list = field(default_factory=list)
    error: str = ""  # why a log found in a folder was not replayed
    left_out: tuple = ()  # other views of the same run, left out beside this log (see sources.Source)
    policies: dict = field(default_factory=dict)  # rank -> WouldBeRollbacks
    stats: Stats = field(default_factory=Stats)
    tracks: dict = field(default_factory=dict)  # rank -> Track (plot series), with ReplayOptions.plot_ranks
    actions: list = field(default_factory=list)  # what the live monitor did (rollbacks, stops), as its lines say
    positional: int = 0  # step records numbered by their place in the log: it names no step (Trainer dicts alone)

    def _in_order(self, kind: str) -> list[dict]:
        """Each rank's ``kind`` list (its policy's ``rollbacks`` or ``missed``), ``rank`` added, in the order they
        came (a run that went back repeats its step numbers): each rank's first, then each rank's second, ..."""
        return [r for _, _, r in sorted((i, rank, {**r, "rank": rank}) for rank, p in self.policies.items()
                                        for i, r in enumerate(getattr(p, kind)))]

    def would_be_rollbacks(self) -> list[dict]:
        """Each rank's would-be rollbacks, ``rank`` added, in the order they came."""
        return self._in_order("rollbacks")

    def would_stop(self) -> list[dict]:
        """Each rank's would-be stop (``{"at_step", "reason", "rank"}``), in step order; empty when none."""
        return sorted(({**p.stop, "rank": rank} for rank, p in self.policies.items() if p.stop),
                      key=lambda r: (r["at_step"], r["rank"]))

    def rollbacks_without_checkpoint(self) -> list[dict]:
        """Rollbacks asked for when no checkpoint was healthy yet (``checkpoint_every`` known), ``rank`` added, in
        the order they came."""
        return self._in_order("missed")

    @property
    def records(self) -> int:
        """The log's records read: step records + evaluation records + lines merged into a step record."""
        return self.steps + self.evaluations + self.merged_lines

    @property
    def lines(self) -> int:
        """Lines (TensorBoard: steps and events) read: records + reports + skipped, less the items that shared
        a line with the one before (:attr:`glued`)."""
        return self.records + self.reports + self.skipped_lines - self.glued

    def to_dict(self) -> dict:
        return {"path": self.path, "format": self.format, "records": self.records, "steps": self.steps,
                "evaluations": self.evaluations,
                "skipped_lines": self.skipped_lines, "anomalies": [e.to_dict() for e in self.events],
                "last_step": self.last.step if self.last else None, "reports": self.reports,
                "merged_lines": self.merged_lines, "positional_steps": self.positional, "lines": self.lines,
                "skipped": dict(self.skipped.most_common()),
                "ranks": sorted(self.ranks), "anomalies_not_kept": self.events_dropped, "files": self.files,
                "would_be_rollbacks": self.would_be_rollbacks(), "would_stop": self.would_stop(),
                "rollbacks_without_checkpoint": self.rollbacks_without_checkpoint(), "live_actions": self.actions,
                "stats": self.stats.to_dict(),
                **({"error": self.error} if self.error else {}),
                **({"left_out": list(self.left_out)} if self.left_out else {})}


def _split_rank(line: str, by_rank: bool = True):
    """``(rank, rest)`` of a line with a rank prefix (``[rankN]:`` only with ``by_rank``), else ``(None, line)``."""
    if line.startswith(_RANK_STARTS):
        m = _RANK_PREFIX.match(line)
        if m is not None and (by_rank or line.startswith("[default")):
            return int(m.group(1)), line[m.end():]
    return None, line


_VOTERS = [m for m in PARSERS.values() if m is not generic]
_MEASURED = ("loss", "grad_norm", "loss_scale", "overflow", "lr", "step_time_s", "data_wait_s", "tokens", "samples",
             "mfu")


def _agree(a: StepRecord, b: StepRecord) -> bool:
    """True when each value ``a`` and ``b`` both have is the same as printed: equal within half a unit of the
    coarser print's last decimal place (a step's line and its JSON record: ``loss=2.0346``, ``2.0345585346``)."""
    if a.rank != b.rank:
        return False
    for name in _MEASURED:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None or x == y or x != x and y != y:
            continue
        if isinstance(x, bool) or isinstance(y, bool) or not abs(x - y) <= 0.5001 * 10.0 ** -min(decimals(x),
                                                                                                 decimals(y)):
            return False
    return True


def _complete(a: StepRecord, b: StepRecord) -> None:
    """Give ``a`` the values of ``b`` it does not have."""
    for name in _MEASURED:
        if getattr(a, name) is None and getattr(b, name) is not None:
            setattr(a, name, getattr(b, name))


def detect(lines) -> tuple[str, bool]:
    """The format most of ``lines`` belong to: a line votes for the first format that claims it, else for the
    generic text reader when it names a step and a loss; the text reader also when no line votes. And whether
    ``[rankN]:`` names the rank of a line: when it leads most of the lines that voted."""
    votes: Counter = Counter()
    by_rank = 0
    for line in lines:
        rank, line = _split_rank(line)
        mod = next((m for m in _VOTERS if m.detect(line)), None)
        if mod is None and not generic.detect(line):
            continue
        votes[mod.NAME if mod is not None else generic.NAME] += 1
        by_rank += rank is not None
    order = list(PARSERS)
    ranked = sorted(votes, key=lambda n: (-votes[n], order.index(n)))
    return (ranked[0] if ranked else generic.NAME), 2 * by_rank > sum(votes.values())


class _Rank:
    """What one rank of a log feeds: its engine, would-be rollback policy, plot series and backfill series."""

    __slots__ = ("engine", "policy", "track", "feed")

    def __init__(self, engine, policy, track, feed):
        self.engine, self.policy, self.track, self.feed = engine, policy, track, feed


class _Slot:
    """The state of the lines of one rank: their parser, the record it gave last and not yet judged
    (``pending``), whether that record's step is its position in the log (``positional``: Parser.named),
    the records held until the log names a step (``unplaced``: _judge) and the evaluations waiting for the
    pending record (``waiting``: _evaluate)."""

    __slots__ = ("parser", "pending", "positional", "unplaced", "waiting")

    def __init__(self, parser):
        self.parser, self.pending, self.positional = parser, None, False
        self.unplaced: list[StepRecord] = []
        self.waiting: list[tuple[Evaluation, int]] = []


class _Run:
    """One log's replay state: a parser per rank seen in it (with its record not yet judged), a :class:`_Rank`
    per rank."""

    def __init__(self, result: ReplayResult, module, rules: Rules, rank: int, options: ReplayOptions | None = None):
        self.result, self.module, self.rules, self.rank = result, module, rules, rank
        self.options = options or ReplayOptions()
        self.parsers: dict[int, _Slot] = {}  # line rank -> its slot
        self.ranks: dict[int, _Rank] = {}
        self.run_label = self.options.run or default_run(result.files[-1] if result.files else result.path)
        self.progress = self.options.progress
        self.countdown = EVERY
        self.prefixed = None  # rank of the last line with a torchrun prefix (text logs)
        self.by_rank = True  # [rankN]: names a line's rank (detect)
        self.own_events = True  # the parsers read this monitor's own event lines (Source.own_events)
        self.reached: dict = {}  # Source.reached
        # trainer slowness reports: (report, the step period before it, or None before any timed step of its rank
        # and then the first timed step after it)
        self.unconfirmed: list[tuple[Report, float | None, StepRecord | None]] = []
        # events the live monitor found outside the step records (Source.event_log), with their times, latest first
        self.outside: list[tuple[float, Report]] = []

    def _bound(self, ranks: dict) -> None:
        if len(ranks) >= MAX_RANKS:
            raise SourceError(f"{self.result.path}: more than {MAX_RANKS} distinct ranks in one log")

    def slot(self, key: int) -> _Slot:
        """The :class:`_Slot` of the lines of rank ``key``."""
        slot = self.parsers.get(key)
        if slot is None:
            self._bound(self.parsers)
            parser = self.module.Parser(key, self.options.openmetrics is not None)
            parser.own_events = self.own_events
            parser.reached = self.reached
            stall = self.rules.rules.get("stall")
            parser.stall = stall if stall is not None and stall.enabled else None  # hangs in the line times
            parser.fast = self.options.fast  # the text reader's recipes for plain step lines
            slot = self.parsers[key] = _Slot(parser)
        return slot

    def feed(self, line, line_rank=None) -> None:
        r = self.result
        key = self.rank if line_rank is None else line_rank
        slot = self.parsers.get(key) or self.slot(key)
        parser = slot.parser
        item = parser.feed(line)
        if item is None:
            if parser.reason == MERGED:
                r.merged_lines += 1
                # a line merged into the pending record may name its step
                slot.positional = slot.positional and not parser.named
            else:
                r.skipped_lines += 1
                r.skipped[parser.reason] += 1
                if parser.reason == ACTION and len(r.actions) < MAX_ACTIONS:
                    r.actions.append(parser.action)
        elif item.__class__ is StepRecord:
            self._took(item, slot, key)
        else:
            self._item(item, slot, key)
            if parser.after:
                self._after(slot, key)

    def _item(self, item, slot: _Slot, key: int) -> None:
        """Hand on a report or an evaluation of the lines of rank ``key``."""
        if item.__class__ is Evaluation:
            self.result.evaluations += 1  # (a report counts in _report)
            self._evaluate(item, slot, key)
        else:
            self._report(item if isinstance(item, Report) else Report(*item), slot, key)

    def _took(self, item: StepRecord, slot: _Slot, key: int) -> None:
        """The parser of ``slot`` (lines of rank ``key``) gave the record ``item``: the pending one is judged,
        ``item`` waits in its place."""
        r, parser, pending = self.result, slot.parser, slot.pending
        if parser.absorbs:  # the record takes the pending one's place (and this line is merged into it)
            parser.absorbs = False
            slot.pending = item
            r.merged_lines += 1
        else:
            if pending is not None:
                if pending.step == item.step and pending == item:
                    parser.last = pending  # lines that complete a record complete the one kept
                    r.skipped_lines += 1
                    r.skipped[DUPLICATE] += 1
                    return
                if pending.step == item.step and _agree(pending, item):  # the step's values printed again
                    _complete(pending, item)
                    parser.last = pending
                    r.merged_lines += 1
                    return
                self._judge(pending, slot)
            slot.pending = item
            r.steps += 1
        slot.positional = not parser.named
        if parser.held:
            self._release(slot, key, item.step)
        if parser.after:
            self._after(slot, key)

    def _after(self, slot: _Slot, key: int) -> None:
        """Hand on what the parser of ``slot`` made of the line it just gave, after its item: reports,
        evaluations, an overflow message's record (taken as the next record); the line counts once
        (:attr:`ReplayResult.glued`)."""
        parser = slot.parser
        after, parser.after = parser.after, []
        self.result.glued += len(after)
        for item in after:
            if item.__class__ is StepRecord:
                self._took(item, slot, key)
            else:
                self._item(item, slot, key)

    def take(self, batch) -> None:
        """Take what a :class:`~.scan.Batch` read from lines of rank :attr:`rank`, as :meth:`feed` takes each of
        those lines: the first record as :meth:`feed` does, the others judged through the batch (the last one
        pending)."""
        r = self.result
        for reason, lines in ((DUPLICATE, batch.duplicates), (PROGRESS, batch.progress)):
            if lines:
                r.skipped_lines += lines
                r.skipped[reason] += lines
        n = len(batch)
        if not n:
            return
        slot = self.slot(self.rank)
        slot.parser.last = first = batch.record(0)  # as the parser keeps each record it gives
        self._took(first, slot, self.rank)
        slot.positional = False  # (a batch's records name their steps: the text parser did not read their lines)
        if n == 1:
            return
        # the pending record is the batch's first (or one equal to it) unless a held report had it judged
        start = 0 if slot.pending is not None else 1
        slot.pending = None
        self._place(slot, batch.record(start).step)
        self._observe_batch(batch, start, n - 1)
        slot.pending = slot.parser.last = batch.record(n - 1)
        r.steps += n - 1

    def _rank(self, rank: int) -> _Rank:
        st = self.ranks.get(rank)
        if st is None:
            self._bound(self.ranks)
            o, r = self.options, self.result
            track = None
            if o.plotted < o.plot_ranks:
                track = r.tracks[rank] = Track()
                o.plotted += 1
            policy, sinks, feed = o.policy(), [r], None
            if o.openmetrics is not None:
                feed = o.openmetrics.feed(self.run_label, rank)
                feed.policy = policy
                sinks.append(feed)
            st = self.ranks[rank] = _Rank(Engine(self.rules, sinks), policy, track, feed)
            r.policies[rank] = st.policy
            r.ranks.add(rank)
        return st

    def _judge(self, rec: StepRecord, slot: _Slot) -> None:
        """Judge ``rec``, the pending record of ``slot``, then the evaluations that waited for it. A record whose
        step is its position (the log has named no step yet: overflow messages before the first step line) waits,
        up to :data:`HELD` of them: the step of the next record that has one places them (:meth:`_place`); at the
        end of the log, before a trainer report, or past :data:`HELD`, they are judged as positions."""
        if slot.positional:
            if len(slot.unplaced) < HELD:
                slot.unplaced.append(rec)
            else:
                self._place(slot, None)
                self._observe(rec, True)
        else:
            self._place(slot, rec.step)
            slot.parser.paced(rec)
            self._observe(rec)
        waiting, slot.waiting = slot.waiting, []
        for ev, key in waiting:
            self._evaluated(ev, key)

    def _place(self, slot: _Slot, step: int | None) -> None:
        """Judge the records ``slot`` holds: before a record at trainer step ``step``, at the steps just before it
        (so the messages before ``iteration 10`` are at start-up, those before ``iteration 17060`` are not), else
        (None) as positions, not known to be at start-up."""
        if not slot.unplaced:
            return
        held, slot.unplaced = slot.unplaced, []
        if step is not None and step > len(held):
            held = [dataclasses.replace(r, step=step - len(held) + i) for i, r in enumerate(held)]
        for r in held:
            self._observe(r, step is None)

    def _observe(self, rec: StepRecord, positional: bool = False) -> None:
        if self.outside and rec.timestamp is not None:
            self._outside(rec.timestamp)
        st = self.ranks.get(rec.rank) or self._rank(rec.rank)
        if positional:  # its step is its position in a log that numbers none: not known to be at start-up
            st.engine.judge.by_position()
            self.result.positional += 1
        t = rec.trainer_step  # (the monitor's record log: after a rollback, in a resumed process)
        st.engine.offset = 0 if t is None else t - rec.step
        self._judged(st, rec, st.engine.observe(rec))

    def _observe_batch(self, batch, start: int, end: int) -> None:
        """Judge records ``start`` to ``end - 1`` of ``batch``: each record the policy has to see (or every
        one, with per-record series) goes to :meth:`_judged`, the others only add their step times."""
        st = self.ranks.get(batch.rank) or self._rank(batch.rank)
        engine, policy, sample = st.engine, st.policy, self.result.stats.samples["step_time_s"]
        each = st.track is not None or st.feed is not None
        batch.select(start, end)
        while batch.next < end:
            first = batch.next
            events = engine.observe(batch, -FAR if each else policy.due)
            stop = batch.next - batch.stopped
            batch.add_step_times(sample, first, stop)
            self._count(stop - first)
            if batch.stopped:
                self._judged(st, batch.record(stop), events)
        if batch.next > start and not batch.stopped:
            self.result.last = batch.record(batch.next - 1)

    def _count(self, records: int) -> None:
        self.countdown -= records
        if self.countdown <= 0:
            self.countdown = EVERY
            if self.progress is not None:
                self.progress.tick()

    def _judged(self, st: _Rank, rec: StepRecord, events: list) -> None:
        """``rec`` was judged by ``st``'s engine and raised ``events``: feed the rest."""
        engine, policy = st.engine, st.policy
        policy.after_step(rec.step, events, engine.judge.went_back)
        self.result.stats.add(rec)
        if st.track is not None:
            st.track.add(rec)
        if st.feed is not None:
            st.feed.on_record(rec, events)
        self.result.last = rec
        self._count(1)
        if self.unconfirmed:
            self._confirm(rec)

    def _report(self, rep: Report, slot: _Slot, key: int) -> None:
        r = self.result
        cfg = self.rules.rules.get(rep.rule)
        if cfg is None or not cfg.enabled:
            r.skipped_lines += 1
            r.skipped[UNKNOWN_RULE if cfg is None else RULE_DISABLED] += 1
            return
        self._settle(slot)
        rep = rep if rep.rank is not None else rep._replace(rank=key)
        if rep.source == "monitor" and self._rejudged(rep):
            r.skipped_lines += 1
            r.skipped[REJUDGED] += 1
            return
        before = r.last
        if rep.rule == "throughput_drop":  # the step times say whether the steps slowed
            timed = before is not None and before.rank == rep.rank and before.step_time_s
            self.unconfirmed.append((rep, _period(before) if timed and before is not None else None, None))
            return
        self._publish(rep)

    def _rejudged(self, rep: Report) -> bool:
        """The monitor's own event line ``rep`` follows the step record whose judging raised an event of its rule
        and rank from the same onset: the live monitor's line of that same event (it logs its event right after
        the trainer prints the step, whose number the trainer may count from 0 where the monitor counts from 1);
        another onset is an event the log's lines do not show (a weights check's)."""
        last, events = self.result.last, self.result.events
        if last is None or last.rank != rep.rank:
            return False
        for ev in reversed(events):
            if ev.step != last.step or ev.rank != rep.rank:
                return False
            if ev.rule == rep.rule and ev.source == "rule" and (
                    rep.onset is None or abs(ev.onset_step - rep.onset) <= 1):
                return True
        return False

    def _publish(self, rep: Report) -> None:
        rank = rep.rank if rep.rank is not None else self.rank
        st = self._rank(rank)
        event = st.engine.report(rep.rule, rep.step, rep.value, rep.message, rank, rep.source, rep.details, rep.onset,
                                 rep.spared, rep.trainer_step)
        st.policy.after_report(event)
        self.result.reports += 1

    def _outside(self, before: float) -> None:
        """Publish the events found outside the step records (:attr:`outside`) from before the time ``before``
        (a record's timestamp; ``inf``: all), as the live monitor published them between its records."""
        while self.outside and self.outside[-1][0] < before:
            rep = self.outside.pop()[1]
            cfg = self.rules.rules.get(rep.rule)
            if cfg is not None and cfg.enabled:
                self._publish(rep)

    def _confirm(self, rec: StepRecord) -> None:
        """A trainer's slowness report (MindData's ``Bad performance attention``) after a timed step is a
        ``throughput_drop`` when the next timed step of its rank, ``rec``, took longer than that one, else not
        (MindData times a batch from the batch before it, so the first batch after a pause between epochs, an
        evaluation or a checkpoint save, warns too). One before any timed step of its rank is one when the first
        timed step after it took over the rule's ``excursion_ratio`` times the second (a pipeline's start-up
        slows the first steps of every run some), else not. One not confirmed counts as a skipped line
        (:data:`NOT_SLOWER`); one with no timed step after it to judge it by is published at the end."""
        if not rec.step_time_s:
            return
        keep = []
        for rep, period, first in self.unconfirmed:
            if rep.rank != rec.rank or first is rec:  # (another rank's step; the first step, seen again at the end)
                keep.append((rep, period, first))
                continue
            if period is None and first is None:  # the first timed step after a report before any
                keep.append((rep, period, rec))
                continue
            if period is not None:
                slowed = _period(rec) > period
            else:
                slowed = first is not None and (_period(first) > self.rules.rules[rep.rule].params["excursion_ratio"]
                                                * _period(rec))
            if slowed:
                self._publish(rep)
            else:
                self.result.skipped_lines += 1
                self.result.skipped[NOT_SLOWER] += 1
        self.unconfirmed = keep

    def _evaluate(self, ev: Evaluation, slot: _Slot, key: int) -> None:
        """Judge the evaluation ``ev`` after the record before it, as the live callback judges MindSpore's: once
        that record, when it is still pending (lines after the evaluation may complete it: nnU-Net's ``This epoch
        took ..`` after its validation loss), is judged."""
        if slot.pending is not None:
            slot.waiting.append((ev, key))
            return
        self._place(slot, None)
        self._evaluated(ev, key)

    def _evaluated(self, ev: Evaluation, key: int) -> None:
        rank = key if ev.rank is None else ev.rank
        st = self._rank(rank)
        for event in st.engine.evaluate(ev.step, ev.loss, rank):
            st.policy.after_report(event)

    def _settle(self, slot: _Slot) -> None:
        """Judge the records of ``slot`` before a report, an evaluation or the end: the pending one, then those it
        holds, at their positions (:meth:`_place`)."""
        if slot.pending is not None:
            self._judge(slot.pending, slot)
            slot.pending = None
        self._place(slot, None)

    def _release(self, slot: _Slot, key: int, step: int) -> None:
        """Publish the reports the parser of ``slot`` held for the step of its next record (each line merged until
        now)."""
        held, slot.parser.held = slot.parser.held, []
        for rep in held:
            self.result.merged_lines -= 1
            self._report(rep._replace(step=step), slot, key)

    def finish(self) -> None:
        for key in sorted(self.parsers):
            slot = self.parsers[key]
            raised = slot.parser.raised
            if raised is not None and raised[0] is slot.parser.last and not slot.parser.held:
                self._report(raised[1], slot, key)  # the log ends in a traceback (messages.traceback)
            if slot.parser.held:
                self._release(slot, key, slot.parser.step)
            if slot.parser.deferred is not None:  # no step record came after the silence
                self._report(slot.parser.deferred, slot, key)
            self._settle(slot)
        if self.unconfirmed and self.result.last is not None:
            self._confirm(self.result.last)  # (the last record of a batch: its records skip _judged)
        for rep, _, _ in self.unconfirmed:  # no timed step after it to judge it by: the trainer's word
            self._publish(rep)
        self.unconfirmed = []
        self._outside(math.inf)


def _beside(path: str) -> tuple[list[tuple[float, Report]], list[str]]:
    """What the event log ``path`` beside a record log adds to it: its events found outside the step records,
    latest first, and what the live monitor did (:func:`.eventlog.beside`); an unreadable one is reported on stderr
    and left out."""
    try:
        found, done = eventlog.beside(path)
    except OSError as exc:
        logger.warning("{}: cannot read the event log beside the record log: {}", shown(path), exc)
        return [], []
    found.sort(key=lambda item: item[0])
    return found[::-1], done


def _files(source: Source, first, head: list, progress: Progress | None):
    """(path, binary stream, lines read from it already) of each file of ``source``; ``head`` was read from
    ``first``."""
    if progress is not None:
        progress.reading(source.paths[0], first)
    yield source.paths[0], first, head
    for path in source.paths[1:]:
        with open_bytes(path) as raw:
            if progress is not None:
                progress.reading(path, raw)
            yield path, raw, []


def _feed_line(run: _Run, line: str) -> None:
    rank, rest = _split_rank(line, run.by_rank) if line.startswith(_RANK_STARTS) else (None, line)
    if rank is not None:
        if run.module is generic:  # the lines after it without a prefix are its hard-wrapped rest
            run.prefixed = rank
        run.feed(rest, rank)
    else:
        run.feed(line, run.prefixed)


def _feed_lines(run: _Run, raw, head: list, at: list) -> None:
    """Feed ``run`` the text lines of ``head`` (lines of ``raw`` read already) then of ``raw``, one at a time;
    ``at[0]``: the line number."""
    stream = text(raw)
    try:
        for at[0], line in enumerate(itertools.chain((t for b in head for t in text_lines(b)), stream), 1):
            _feed_line(run, line)
    finally:
        stream.detach()  # closing raw is its opener's


def _blocks(raw, head: list, size: int):
    """The bytes of ``head`` then of ``raw`` (read ``size`` bytes at a time) in blocks of whole lines: ``(data,
    start, end)``, the block being ``data[start:end]`` (the last may lack its newline)."""
    for i in range(0, len(head), 1024):
        data = b"".join(head[i:i + 1024])
        yield data, 0, len(data)
    rest = b""
    while chunk := raw.read(size):
        start = 0
        if rest:  # the line cut at the end of the chunk before
            start = chunk.find(b"\n") + 1
            if not start:
                rest += chunk
                continue
            line = rest + chunk[:start]
            yield line, 0, len(line)
        cut = chunk.rfind(b"\n") + 1
        if cut > start:
            yield chunk, start, cut
        rest = chunk[max(cut, start):]
    if rest:
        yield rest, 0, len(rest)


def _feed_blocks(run: _Run, raw, head: list, at: list) -> None:
    """As :func:`_feed_lines`, through the compiled reader (:class:`.scan.Batch` of MindFormers step lines, or
    :class:`.scan.TextBatch` of the text reader's plain step lines): the run takes what it read of each block,
    the parser the lines it left."""
    parser, progress = run.slot(run.rank).parser, run.progress
    batch = Batch(run.rank) if run.module is mindformers else TextBatch(run.rank, parser)
    for block, pos, end in _blocks(raw, head, run.options.block_bytes):
        while pos < end:  # (lines after a torchrun prefix are another rank's)
            pos = batch.read(block, pos, end, parser.last if run.prefixed is None else None)
            try:
                run.take(batch)
            except Exception:
                at[0] += batch.offset(batch.next) + 1  # the line that had the failing record judged
                raise
            at[0] += batch.taken
            if pos < end:
                nl = block.find(b"\n", pos, end)
                nxt = end if nl < 0 else nl + 1
                for line in text_lines(block[pos:nxt]):
                    at[0] += 1
                    _feed_line(run, line)
                pos = nxt
        if progress is not None:
            progress.tick()


def _fast(run: _Run) -> bool:
    """Read ``run``'s log through the compiled reader (warn once when it is not built)."""
    global _NOT_BUILT
    if run.module not in (mindformers, generic) or run.options.openmetrics is not None or not run.options.fast:
        return False
    if Batch is None and _NOT_BUILT:
        logger.warning(_NOT_BUILT)
        _NOT_BUILT = ""
    return Batch is not None


def replay_source(source: Source, rules: Rules | None = None, fmt: str = "auto",
                  options: ReplayOptions | None = None) -> ReplayResult:
    """Replay one log (a file, a file and its rotated backups, or stdin) through fresh engines, doing what
    ``options`` asks besides (default :class:`ReplayOptions`: the would-be policy with the live defaults).

    Raises:
        ReplayError: missing, empty, binary or unreadable file; no known format (``fmt="auto"``; a file the
            vote gives a trainer's format whose reader finds no step in it is read by the generic text reader);
            unknown ``fmt``; a line that breaks a parser (named by file and line).
    """
    if fmt != "auto" and fmt not in PARSERS:
        raise ReplayError(f"unknown format {fmt!r} (known: auto, {', '.join(PARSERS)})")
    rules = rules or Rules.load()
    first = source.paths[0]
    if fmt == tensorboard.NAME or fmt == "auto" and first != STDIN and tensorboard.is_event_file(first,
                                                                                                first_bytes(first)):
        if first == STDIN:
            raise ReplayError("TensorBoard event files are read by path, not from standard input")
        return _replay_tensorboard(source, rules, options)
    try:
        raw = open_bytes(first)
    except SourceError as exc:
        raise ReplayError(str(exc)) from None
    with raw:
        try:
            head = list(itertools.islice(raw, DETECT_LINES))
        except SourceError as exc:
            raise ReplayError(str(exc)) from None
        except (EOFError, OSError, zlib.error) as exc:
            raise ReplayError(f"{shown(first)}: cannot read: {exc}") from None
        voted = fmt == "auto"
        fmt, by_rank = detect(t for b in head for t in text_lines(b)) if voted else (fmt, True)
        result = ReplayResult(source.name, fmt, files=list(source.paths), left_out=source.left_out)
        run = _Run(result, PARSERS[fmt], rules, source.rank, options)
        run.by_rank = by_rank
        run.own_events = source.own_events
        run.reached = source.reached
        if source.event_log is not None and fmt == csvlog.NAME:
            run.outside, result.actions = _beside(source.event_log)
        path, at = first, [0]
        feed = _feed_blocks if _fast(run) else _feed_lines
        try:
            for path, stream, lines in _files(source, raw, head, run.progress):  # noqa: B007 (path: in the errors)
                at[0] = 0
                feed(run, stream, lines, at)
        except SourceError as exc:
            raise ReplayError(str(exc)) from None
        except (EOFError, OSError, zlib.error) as exc:
            raise ReplayError(f"{shown(path)}:{at[0] + 1}: cannot read on (truncated or corrupt file?): "
                              f"{exc}") from None
        except Exception as exc:  # a parser bug must name the line, not end in a traceback
            raise ReplayError(f"{shown(path)}:{at[0]}: cannot replay this line: {exc!r}") from None
    run.finish()
    if fmt == generic.NAME and not any(slot.parser.found for slot in run.parsers.values()):
        raise ReplayError(f"{source.name}: no known training-log format: no step with a loss (or a grad norm, "
                          f"a step time or throughput), and no trainer message, in its {count(result.lines, 'line')}")
    if result.steps == 0 and result.reports == 0:
        if voted and fmt != generic.NAME and first != STDIN:  # lines like a trainer's, read as any text log's
            return replay_source(source, rules, generic.NAME, options)
        raise ReplayError(f"{source.name}: no {fmt} step lines found in {result.lines} lines")
    return result


def _replay_tensorboard(source: Source, rules: Rules, options: ReplayOptions | None) -> ReplayResult:
    result = ReplayResult(source.name, tensorboard.NAME, files=list(source.paths))
    run = _Run(result, tensorboard, rules, source.rank, options)
    for path in source.paths:
        if run.progress is not None:
            run.progress.reading(path)
        n = 0
        try:
            for n, item in enumerate(tensorboard.read(path), 1):  # noqa: B007 (n: in the error)
                run.feed(item)
        except ImportError as exc:
            raise ReplayError(f"{path}: {exc}") from None
        except Exception as exc:  # DataLossError and the like: a corrupt event file
            raise ReplayError(f"{path}: not a readable TensorBoard event file after {n} steps/events: "
                              f"{exc!r}") from None
    run.finish()
    if result.steps == 0:
        raise ReplayError(f"{source.name}: no tensorboard step with a loss found in {result.lines} steps/events")
    return result


def replay_file(path: str, rules: Rules | None = None, fmt: str = "auto",
                options: ReplayOptions | None = None) -> ReplayResult:
    """Replay one log file (or ``-`` for stdin) through fresh engines with ``rules``; see :func:`replay_source`."""
    return replay_source(Source(path, [path], 0 if path == STDIN else rank_of(path) or 0), rules, fmt, options)


def replay_paths(paths, rules: Rules | None = None, fmt: str = "auto", options: ReplayOptions | None = None,
                 progress: bool | None = False) -> list[ReplayResult]:
    """Replay every log the paths name (files, folders of per-rank logs, ``-``), each through its own engines,
    with ``options`` (see :class:`ReplayOptions`); ``progress``: a progress bar on stderr (None: when stderr is
    a terminal or the input is large, see :class:`~.progress.Progress`).

    A log named on its own that cannot be replayed raises ReplayError; one found in a folder gives a result
    with ``error`` set, and the others are replayed. A folder's log whose name gives no rank is replayed after
    the logs beside it that do (see :attr:`.sources.Source.reached`); the results keep the sources' order.
    """
    try:
        sources = expand(paths)
    except SourceError as exc:
        raise ReplayError(str(exc)) from None
    rules = rules or Rules.load()
    options = options or ReplayOptions()
    if progress is not False:
        options.progress = Progress([p for s in sources for p in s.paths], progress)
    results: list = [None] * len(sources)
    reached: dict[str, dict[int, int]] = {}  # folder -> rank -> the last step of that rank's own log there
    unranked = [s.found and rank_of(s.paths[-1]) is None for s in sources]  # a launcher's, a scheduler's log...
    try:
        for i in sorted(range(len(sources)), key=unranked.__getitem__):  # ... after the ranks' logs beside it
            source, folder = sources[i], os.path.dirname(sources[i].paths[-1])
            if unranked[i]:
                source = dataclasses.replace(source, reached=reached.get(folder, {}))
            try:
                results[i] = result = replay_source(source, rules, fmt, options)
            except ReplayError as exc:
                if not source.found:
                    raise
                results[i] = ReplayResult(source.name, "", files=list(source.paths), error=str(exc))
                continue
            if source.found and result.last is not None:
                steps = reached.setdefault(folder, {})
                for rank in result.ranks:
                    steps[rank] = max(steps.get(rank, 0), result.last.step)
    finally:
        if options.progress is not None:
            options.progress.close()
            options.progress = None
    if all(r.error for r in results):
        raise ReplayError(f"no log could be replayed; {results[0].error}")
    return results
