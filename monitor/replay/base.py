"""What every replay parser shares: the parser contract, trainer reports, skip reasons, number parsing.

The contract: ``Parser(rank).feed(line)`` returns

* a :class:`~training_monitor.record.StepRecord` (a step the trainer logged),
* a :class:`Report` (something the trainer said about itself: its own NaN check, a collective timeout),
* an :class:`Evaluation` (an evaluation loss the trainer logged, judged by the engine's evaluation rules), or
* None, with ``parser.reason`` telling why: one of the skip reasons below, or :data:`MERGED` when the
  line's values were added to the record returned before (a timing line printed after its step line).

The runner judges a record only when the next record or report arrives (or at the end of the input), so a
parser may still add to :attr:`Parser.last` from the lines that follow it. Two more hand-overs, read by the
runner after each line:

* :attr:`Parser.absorbs` set with a record: the record takes the place of the pending one (a step line taking
  over the overflow record a trainer message made for the same step); the line counts as merged.
* :attr:`Parser.held`: reports made before any step line was read (their step was not known yet, see
  :meth:`Parser.hold`); the runner publishes them at the step of the next record (or at the end), each turning
  its line from merged into a report.
* :attr:`Parser.named`: False while the log has named no step (a step line's, a progress bar's count): the
  records until then are numbered by their position in the log (overflow messages before any step line),
  and the runner tells the rules so (they are not known to be at start-up).
* :attr:`Parser.raised`: the last line of a Python traceback read after the last record (the exception it
  ended in, see :func:`.messages.traceback`): the log ending there, the runner publishes a ``trainer_crash``.
* :attr:`Parser.after`, set with a record: what the same line said after the record (a trainer message
  glued after a progress bar's values, a step line's evaluation loss): reports and evaluations, which the runner
  hands on right after taking the record, or an overflow message's record, which it takes next
  (:attr:`Parser.last` is that record).
"""
from __future__ import annotations

import abc
from typing import NamedTuple

from ..record import StepRecord

# Why a line gave no record. Each skipped line is counted under exactly one of these.
BLANK = "blank line"
NO_STEP = "no step fields"               # an ordinary log line
NO_LOSS = "step line without loss"       # a step marker but no loss: another metric's line, or cut short
NUMBER = "unparsable number"
PROGRESS = "progress bar"
SUMMARY = "summary or evaluation line"   # epoch averages, validation loss, end-of-training totals
HEADER = "header"
DUPLICATE = "duplicate step"             # the very same record twice (a log captured twice)
REPEATED = "repeated trainer message"    # the same timeout reported again for the same step and rank
REJUDGED = "monitor event line of an event replayed"  # the live monitor's line of what the rules found again
NOT_JSON = "not a JSON object"
CELLS = "wrong number of cells"
UNKNOWN_RULE = "unknown rule"           # a report (an event log line) of a rule the rules do not have
RULE_DISABLED = "rule disabled"          # a report of a rule the rules file turns off
ACTION = "rollback or stop record"       # what the live monitor did, in its event log (its events are read)
OTHER_TAG = "other tag"
MERGED = "merged"                        # not a skip: the line completed the record before it
MAX_IN_A_ROW = 1000  # records made of a trainer's count of overflowed steps in a row (Parser.overflowed_in_a_row)
MAX_ACTIONS = 1000  # the live monitor's actions a replay keeps per log (runner.ReplayResult.actions)


class Report(NamedTuple):
    """A trainer's own report, published through the rule ``rule`` (``(rule, step, value, message)`` is enough)."""

    rule: str
    step: int
    value: float | None
    message: str
    rank: int | None = None
    onset: int | None = None
    source: str = "trainer"
    details: str = ""
    spared: tuple = ()  # actions of the rule it does not ask for (an event log's event that asked for fewer)
    trainer_step: int | None = None  # the trainer's number of the step, when another (an event log's event)


class Evaluation(NamedTuple):
    """An evaluation the trainer logged: ``loss``, its evaluation loss (the mean over the evaluation set), after
    training step ``step``, which the line names (``named``) or which is the last step done before it (None).
    The runner hands it to the engine (:meth:`~training_monitor.engine.Engine.evaluate`)."""

    step: int
    loss: float
    rank: int | None = None
    named: int | None = None


def number(text: str) -> float | None:
    """``"10.649"``, ``"[2.244/2.244]"`` (first), ``"[0.]"``, ``"103328ms"``, ``"2.8T"``, ``"nan"``,
    ``"tensor(1.5, device='cuda:0')"`` -> float; anything else (``"[1 31049]"``, ``"abc"``) -> None."""
    t = text.strip().strip("[]").split("/")[0].strip()
    if t.startswith("tensor("):
        t = t[7:].split(",")[0].rstrip(")")
    t = t.removesuffix("ms").removesuffix("T").rstrip("%").strip()
    try:
        return float(t)
    except ValueError:
        return None


class Parser(abc.ABC):
    """Base of every format's parser. Subclasses implement :meth:`parse`.

    ``parse(line)`` returns a record, a :class:`Report`, a skip reason (str), or None for a line that is not
    this format's own; with :attr:`messages` on, such a line is then checked for a trainer message
    (:mod:`.messages`: DeepSpeed overflows, NCCL/HCCL timeouts) before it counts as ``no step fields``.
    """

    name = ""
    messages = False
    own_events = True  # this monitor's own event lines are reports (not beside the monitor's event log: the same)

    def __init__(self, rank: int = 0, times: bool = True):
        self.rank = rank
        self.times = times  # read a step line's time prefix (only a backfill needs it: ~10 % of a replay)
        self.last: StepRecord | None = None
        self.reason = ""
        self.action = ""  # what the live monitor did, as the line that gave ACTION says it
        self.overflow_lines = 0  # overflow messages since the last step line of the format itself
        self.absorbs = False  # the record just returned replaces the pending one
        self.held: list[Report] = []  # reports waiting for the step of the next record
        # a stall report that a step record withdraws (the silence was an evaluation's), published at the log's end
        self.deferred: Report | None = None
        self.after: list = []  # reports, evaluations (or an overflow record) of the line of the record just returned
        self.named = False  # the log named a step (a step line's, a bar's count): the records before it are not
        self.placing: StepRecord | None = None  # ... numbered by their position, as the line read numbers this one
        self._reported: tuple[int, set] = (-1, set())
        self.traceback = False  # a Python traceback's first line was read, its exception line not yet
        self.raised: tuple | None = None  # (the last record then, the crash report) of a traceback's exception line
        self.reported: object = False  # the last record when a report was last given (a traceback after it is its end)
        # the iteration the last overflow message named, and its record
        self._named: tuple[int | None, StepRecord | None] = (None, None)
        self.said: StepRecord | None = None  # the last record an overflow message made (its line is no step line)
        self.reached: dict[int, int] = {}  # rank -> the step its own log reached (sources.Source.reached)
        # id(record) -> (the record, wall s, steps) by the line times (paced; the record held: its id not reused)
        self.paces: dict[int, tuple[StepRecord, float, int]] = {}

    @property
    def step(self) -> int:
        """The last step seen (0 before the first)."""
        return self.last.step if self.last is not None else 0

    @property
    def done(self) -> int:
        """The last step known to be done (a trainer report is about the time after it)."""
        return self.step

    def done_by(self, rank: int) -> int:
        """The last step known to be done by ``rank``: :attr:`done`, or before this log's first step the step that
        rank's own log reached (:attr:`reached`: this log is a launcher's or a scheduler's beside the ranks' logs)."""
        return self.done if self.last is not None else self.reached.get(rank, self.done)

    def next_step(self) -> int:
        """The step an overflow message belongs to: the one after the last step seen."""
        return self.step + 1

    def feed(self, line):
        self.placing = None
        item = self.parse(line)
        if item is None and self.messages:
            item = messages.match(line, self)
        if item is None:
            item = NO_STEP if line.strip() else BLANK
        cls = item.__class__
        if cls is str:
            self.reason = item
            if line.__class__ is str and (self.traceback or messages.TRACEBACK in line):
                messages.traceback(line, self)
            return None
        if cls is Report:
            self.reported, self.raised = self.last, None
        if cls is StepRecord:
            self.last = item
            if item is not self.placing:
                self.named = True
            if self.after and self.after[-1].__class__ is StepRecord:
                self.last = self.after[-1]  # an overflow message's record after the line's own: the last
            if self.times and item.timestamp is None and line.__class__ is str:
                item.timestamp = line_time(line)  # the line's own time prefix, when it has one
        return item

    def paced(self, rec: StepRecord) -> None:
        """Give ``rec``, about to be judged, the step time its line's time shows (:attr:`paces`: the wall time
        since the step line before and the steps since it, set by a format that reads line times) when its lines
        printed none, or printed one over twice that wall time and a second (a time its step cannot have taken:
        an elapsed total, SiaStegNet's ``Time: 33558.5`` after the epoch's last step line)."""
        pace = self.paces.pop(id(rec), None)
        if pace is not None and (rec.step_time_s is None or rec.step_time_s > 2.0 * pace[1] + 1.0):
            rec.step_time_s = pace[1] / pace[2]

    @abc.abstractmethod
    def parse(self, line):
        """This format's reading of one line (see the class docstring)."""

    def overflowed(self, attempted: float | None, new: float | None, iteration: int | None = None,
                   applied: bool = False):
        """A trainer's overflow message (:mod:`.messages`): the step after the last one seen overflowed at the
        loss scale ``attempted`` (the one it ran with; else the ``new``, lower one, when only that is printed),
        its update skipped (``applied``: applied all the same), ``new`` its ``loss_scale_next`` when both are
        printed. A record of its own (DeepSpeed prints no step; the ``iteration`` it names, counted from 0, places
        it at step ``iteration + 1`` when that lies between the last step seen and :meth:`next_step`), unless
        :meth:`repeats` the last one; before any step the log names, numbered by its position
        (:attr:`named`)."""
        scale = attempted if attempted is not None else new
        repeat = self.repeats(iteration, scale)
        if repeat is not None:
            return repeat
        self.overflow_lines += 1
        step = self.next_step()
        if iteration is not None and self.step < iteration + 1 < step:  # (see .messages: DeepSpeed's count from 0)
            step = iteration + 1
        rec = self.record(step, overflow=True, loss_scale=scale, overflow_applied=applied or None,
                          loss_scale_next=new if attempted is not None else None)
        self._named, self.said = (iteration, rec), rec
        if not self.named and self.done == self.step:
            self.placing = rec
        return rec

    def overflowed_in_a_row(self, count: int):
        """A trainer's message that its last ``count`` steps all overflowed (:mod:`.messages`): the record of each,
        at the steps after the last one seen (at most :data:`MAX_IN_A_ROW`), the first returned, the others after
        it (:attr:`after`); before any step the log names, numbered by their position (:attr:`named`)."""
        first = self.next_step()
        recs = [self.record(first + i, overflow=True) for i in range(max(1, min(count, MAX_IN_A_ROW)))]
        self.said = recs[0]
        if not self.named and self.done == self.step:
            self.placing = recs[0]
        self.after.extend(recs[1:])
        return recs[0]

    def repeats(self, iteration: int | None, scale: float | None) -> str | None:
        """Whether an overflow message naming ``iteration`` (None: none) at ``scale`` is about the overflow the
        last message naming its iteration (DeepSpeed's optimizers) reported, with no record since: the same
        iteration again is another rank's copy (:data:`REPEATED`); a message naming none, at that overflow
        record's scale (or the record has none yet), the engine's summary of it (:data:`MERGED`, the scale
        kept). None: another overflow."""
        named, rec = self._named
        if named is None or rec is None or self.last is not rec:
            return None
        if iteration == named:
            return REPEATED
        if iteration is None and rec.overflow and (rec.loss_scale is None or rec.loss_scale == scale):
            rec.loss_scale = scale if rec.loss_scale is None else rec.loss_scale
            return MERGED
        return None

    def hold(self, report: Report) -> Report | str:
        """``report`` (once per step, see :meth:`once`); before any step line, held (:attr:`held`, the line
        counted as merged meanwhile) for the step of the next record."""
        if self.last is not None:
            return self.once(report)
        if any(r.rule == report.rule and r.rank == report.rank for r in self.held):
            return REPEATED
        self.held.append(report)
        return MERGED

    def record(self, step: int, **fields) -> StepRecord:
        return StepRecord(step=step, rank=self.rank, **fields)

    def merge(self, **fields) -> str:
        """Add ``fields`` (those not None) to the last record; the reason to return for the line."""
        if self.last is None:
            return SUMMARY
        for key, value in fields.items():
            if value is not None:
                setattr(self.last, key, value)
        return MERGED

    def told(self, rule: str, rank: int | None) -> bool:
        """A trainer's report of ``rule`` and ``rank`` was handed on at the last step done (see :meth:`once`)."""
        step, seen = self._reported
        return step == self.done and (rule, rank, None) in seen

    def once(self, report: Report) -> Report | str:
        """``report``, or :data:`REPEATED` when the same rule and rank were already reported at this step (the
        monitor's own event lines: with the same onset; the live monitor may raise a rule twice at a step, a
        NaN's alert and then its weights check's rollback from an earlier onset)."""
        step, seen = self._reported
        if step != report.step:
            seen = set()
            self._reported = (report.step, seen)
        key = (report.rule, report.rank, report.onset if report.source == "monitor" else None)
        if key in seen:
            return REPEATED
        seen.add(key)
        return report


from . import messages  # noqa: E402  (at the end: messages imports the names above)
from .clock import line_time  # noqa: E402
