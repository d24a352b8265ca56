"""Read logs, pick their format, feed records and trainer reports to one :class:`~monitor.engine.Engine` per rank.

Every line read is counted once: as a record, a trainer report, a line merged into the record before it, or
a skipped line under its reason. Memory stays bounded whatever the input size: lines are streamed, and a
result keeps counts, the events and the last record.
"""
from __future__ import annotations

import itertools
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field

from ..engine import Engine
from ..record import StepRecord
from ..rules import Rules
from . import csvlog, deepspeed, eventlog, hf, jsonl, megatron, mindformers, mindspore_log, nanogpt, tensorboard
from .base import DUPLICATE, MERGED, RULE_DISABLED, UNKNOWN_RULE, Report
from .sources import STDIN, Source, SourceError, expand, first_bytes, open_text, rank_of

PARSERS = {m.NAME: m for m in (mindformers, mindspore_log, megatron, hf, nanogpt, deepspeed, jsonl, csvlog, eventlog,
                               tensorboard)}
DETECT_LINES = 5000
MAX_EVENTS = 10000  # per log; more are counted, not kept

# the prefix torchrun --tee puts on every line of worker N ([default3]:): one log per worker, interleaved.
# (PyTorch's own "[rank3]:" prefix is on its C++ log lines only, amid the worker's other lines: left as is.)
_RANK_PREFIX = re.compile(r"\[default(\d+)\]:")
_RANK_STARTS = "[default"


class ReplayError(Exception):
    """A log that cannot be replayed; the message names the file (and line) and the reason."""


@dataclass
class ReplayResult:
    """Outcome of one log: counts, the engines' events, and the last record."""

    path: str
    format: str
    records: int = 0
    skipped_lines: int = 0
    events: list = field(default_factory=list)
    last: StepRecord | None = None
    reports: int = 0
    merged_lines: int = 0
    skipped: Counter = field(default_factory=Counter)
    ranks: set = field(default_factory=set)
    events_dropped: int = 0
    files: list = field(default_factory=list)
    error: str = ""  # why a log found in a folder was not replayed

    @property
    def lines(self) -> int:
        """Lines (TensorBoard: steps and events) read: records + reports + merged + skipped."""
        return self.records + self.reports + self.merged_lines + self.skipped_lines

    def to_dict(self) -> dict:
        return {"path": self.path, "format": self.format, "records": self.records,
                "skipped_lines": self.skipped_lines, "anomalies": [e.to_dict() for e in self.events],
                "last_step": self.last.step if self.last else None, "reports": self.reports,
                "merged_lines": self.merged_lines, "lines": self.lines, "skipped": dict(self.skipped.most_common()),
                "ranks": sorted(self.ranks), "anomalies_not_kept": self.events_dropped, "files": self.files,
                **({"error": self.error} if self.error else {})}


def _split_rank(line: str):
    if line.startswith(_RANK_STARTS):
        m = _RANK_PREFIX.match(line)
        if m is not None:
            return int(m.group(1)), line[m.end():]
    return None, line


def detect(lines) -> str | None:
    """The format most of ``lines`` belong to; the fallback format only when no other matches."""
    votes = Counter()
    for line in lines:
        line = _split_rank(line)[1]
        for name, mod in PARSERS.items():
            if mod.detect(line):
                votes[name] += 1
    order = list(PARSERS)
    ranked = sorted(votes, key=lambda n: (getattr(PARSERS[n], "FALLBACK", False), -votes[n], order.index(n)))
    return ranked[0] if ranked else None


class _Run:
    """One log's replay state: a parser per rank seen in it (with its record not yet judged), an engine per rank."""

    def __init__(self, result: ReplayResult, module, rules: Rules, rank: int):
        self.result, self.module, self.rules, self.rank = result, module, rules, rank
        self.parsers: dict[int, list] = {}  # line rank -> [parser, pending record]
        self.engines: dict[int, Engine] = {}

    def feed(self, line, line_rank=None) -> None:
        r = self.result
        key = self.rank if line_rank is None else line_rank
        slot = self.parsers.get(key)
        if slot is None:
            slot = self.parsers[key] = [self.module.Parser(key), None]
        parser = slot[0]
        item = parser.feed(line)
        if item is None:
            if parser.reason == MERGED:
                r.merged_lines += 1
            else:
                r.skipped_lines += 1
                r.skipped[parser.reason] += 1
        elif item.__class__ is StepRecord:
            pending = slot[1]
            if pending is not None:
                if pending.step == item.step and pending == item:
                    parser.last = pending  # lines that complete a record complete the one kept
                    r.skipped_lines += 1
                    r.skipped[DUPLICATE] += 1
                    return
                self._observe(pending)
            slot[1] = item
            r.records += 1
        else:
            self._report(item if isinstance(item, Report) else Report(*item), slot, key)

    def _engine(self, rank: int) -> Engine:
        engine = self.engines.get(rank)
        if engine is None:
            engine = self.engines[rank] = Engine(self.rules)
            self.result.ranks.add(rank)
        return engine

    def _keep(self, engine: Engine) -> None:
        r = self.result
        room = max(0, MAX_EVENTS - len(r.events))
        r.events.extend(engine.events[:room])
        r.events_dropped += max(0, len(engine.events) - room)
        engine.events.clear()

    def _observe(self, rec: StepRecord) -> None:
        engine = self._engine(rec.rank)
        if engine.observe(rec):
            self._keep(engine)
        self.result.last = rec

    def _report(self, rep: Report, slot: list, key: int) -> None:
        r = self.result
        cfg = self.rules.rules.get(rep.rule)
        if cfg is None or not cfg.enabled:
            r.skipped_lines += 1
            r.skipped[UNKNOWN_RULE if cfg is None else RULE_DISABLED] += 1
            return
        if slot[1] is not None:  # the record before the report is judged first
            self._observe(slot[1])
            slot[1] = None
        rank = key if rep.rank is None else rep.rank
        event = self._engine(rank).report(rep.rule, rep.step, rep.value, rep.message, rank, rep.source, rep.details)
        if rep.onset is not None:
            event.onset_step = min(rep.onset, event.step)
        self._keep(self.engines[rank])
        r.reports += 1

    def finish(self) -> None:
        for key in sorted(self.parsers):
            slot = self.parsers[key]
            if slot[1] is not None:
                self._observe(slot[1])
                slot[1] = None


def _files(source: Source, first, head: list):
    """(path, lines) of each file of ``source``; ``head`` was read from ``first`` already."""
    yield source.paths[0], itertools.chain(head, first)
    for path in source.paths[1:]:
        with open_text(path) as fh:
            yield path, fh


def replay_source(source: Source, rules: Rules | None = None, fmt: str = "auto") -> ReplayResult:
    """Replay one log (a file, a file and its rotated backups, or stdin) through fresh engines.

    Raises:
        ReplayError: missing, empty, binary or unreadable file; no known format (``fmt="auto"``); unknown
            ``fmt``; a line that breaks a parser (named by file and line).
    """
    if fmt != "auto" and fmt not in PARSERS:
        raise ReplayError(f"unknown format {fmt!r} (known: auto, {', '.join(PARSERS)})")
    rules = rules or Rules.load()
    first = source.paths[0]
    if fmt == tensorboard.NAME or fmt == "auto" and first != STDIN and tensorboard.is_event_file(first,
                                                                                                first_bytes(first)):
        if first == STDIN:
            raise ReplayError("TensorBoard event files are read by path, not from standard input")
        return _replay_tensorboard(source, rules)
    try:
        fh = open_text(first)
    except SourceError as exc:
        raise ReplayError(str(exc)) from None
    with fh:
        try:
            head = list(itertools.islice(fh, DETECT_LINES))
        except (EOFError, OSError, zlib.error) as exc:
            raise ReplayError(f"{first}: cannot read: {exc}") from None
        if fmt == "auto":
            fmt = detect(head)
            if fmt is None:
                raise ReplayError(f"{source.name}: no known training-log format in its first {len(head)} lines "
                                  f"(known: {', '.join(PARSERS)}; force one with --format)")
        result = ReplayResult(source.name, fmt, files=list(source.paths))
        run = _Run(result, PARSERS[fmt], rules, source.rank)
        path, lineno, feed = first, 0, run.feed
        try:
            for path, lines in _files(source, fh, head):
                lineno = 0
                for lineno, line in enumerate(lines, 1):
                    if line.startswith(_RANK_STARTS):
                        rank, line = _split_rank(line)
                        feed(line, rank)
                    else:
                        feed(line)
        except SourceError as exc:
            raise ReplayError(str(exc)) from None
        except (EOFError, OSError, zlib.error) as exc:
            raise ReplayError(f"{path}:{lineno + 1}: cannot read on (truncated or corrupt file?): {exc}") from None
        except Exception as exc:  # a parser bug must name the line, not end in a traceback
            raise ReplayError(f"{path}:{lineno}: cannot replay this line: {exc!r}") from None
    run.finish()
    if result.records == 0 and result.reports == 0:
        raise ReplayError(f"{source.name}: no {fmt} step lines found in {result.lines} lines")
    return result


def _replay_tensorboard(source: Source, rules: Rules) -> ReplayResult:
    result = ReplayResult(source.name, tensorboard.NAME, files=list(source.paths))
    run = _Run(result, tensorboard, rules, source.rank)
    for path in source.paths:
        n = 0
        try:
            for n, item in enumerate(tensorboard.read(path), 1):
                run.feed(item)
        except ImportError as exc:
            raise ReplayError(f"{path}: {exc}") from None
        except Exception as exc:  # DataLossError and the like: a corrupt event file
            raise ReplayError(f"{path}: not a readable TensorBoard event file after {n} steps/events: "
                              f"{exc!r}") from None
    run.finish()
    if result.records == 0:
        raise ReplayError(f"{source.name}: no tensorboard step with a loss found in {result.lines} steps/events")
    return result


def replay_file(path: str, rules: Rules | None = None, fmt: str = "auto") -> ReplayResult:
    """Replay one log file (or ``-`` for stdin) through fresh engines with ``rules``; see :func:`replay_source`."""
    return replay_source(Source(path, [path], 0 if path == STDIN else rank_of(path) or 0), rules, fmt)


def replay_paths(paths, rules: Rules | None = None, fmt: str = "auto") -> list[ReplayResult]:
    """Replay every log the paths name (files, folders of per-rank logs, ``-``), each through its own engines.

    A log named on its own that cannot be replayed raises ReplayError; one found in a folder gives a result
    with ``error`` set, and the others are replayed.
    """
    try:
        sources = expand(paths)
    except SourceError as exc:
        raise ReplayError(str(exc)) from None
    rules = rules or Rules.load()
    results = []
    for source in sources:
        try:
            results.append(replay_source(source, rules, fmt))
        except ReplayError as exc:
            if not source.found:
                raise
            results.append(ReplayResult(source.name, "", files=list(source.paths), error=str(exc)))
    if all(r.error for r in results):
        raise ReplayError(f"no log could be replayed; {results[0].error}")
    return results
