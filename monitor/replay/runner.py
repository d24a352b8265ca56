"""Read a log, pick its format, feed records and trainer reports to an :class:`~monitor.engine.Engine`."""
from __future__ import annotations

import gzip
import itertools
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..engine import Engine
from ..record import StepRecord
from ..rules import Rules
from . import csvlog, mindformers

PARSERS = {mindformers.NAME: mindformers, csvlog.NAME: csvlog}
DETECT_LINES = 5000


class ReplayError(Exception):
    """A log that cannot be replayed; the message names the file (and line) and the reason."""


@dataclass
class ReplayResult:
    """Outcome of one file: counts, the engine's events, and the last record."""

    path: str
    format: str
    records: int = 0
    skipped_lines: int = 0
    events: list = field(default_factory=list)
    last: StepRecord | None = None

    def to_dict(self) -> dict:
        return {"path": self.path, "format": self.format, "records": self.records,
                "skipped_lines": self.skipped_lines, "anomalies": [e.to_dict() for e in self.events],
                "last_step": self.last.step if self.last else None}


def _open_lines(path: str):
    p = Path(path)
    if not p.exists():
        raise ReplayError(f"{path}: no such file")
    if p.is_dir():
        raise ReplayError(f"{path}: is a directory, give the log files inside it")
    with open(p, "rb") as f:
        head = f.read(8192)
    if not head:
        raise ReplayError(f"{path}: empty file")
    if head[:2] == b"\x1f\x8b":
        fh = gzip.open(p, "rt", encoding="utf-8", errors="replace")
        try:
            with gzip.open(p, "rb") as g:
                head = g.read(8192)
        except (EOFError, OSError, zlib.error) as exc:
            fh.close()
            raise ReplayError(f"{path}: truncated or corrupt gzip file ({exc})") from None
    else:
        fh = open(p, encoding="utf-8", errors="replace")
    if b"\x00" in head or sum(b < 9 or 13 < b < 32 for b in head) > len(head) // 10:
        fh.close()
        raise ReplayError(f"{path}: binary file, not a text training log")
    return fh


def replay_file(path: str, rules: Rules | None = None, fmt: str = "auto") -> ReplayResult:
    """Replay one log file through a fresh engine with ``rules``.

    Raises:
        ReplayError: missing, empty, binary or unreadable file; no known format (``fmt="auto"``);
            unknown ``fmt``.
    """
    if fmt != "auto" and fmt not in PARSERS:
        raise ReplayError(f"unknown format {fmt!r} (known: auto, {', '.join(PARSERS)})")
    with _open_lines(path) as fh:
        try:
            head = list(itertools.islice(fh, DETECT_LINES))
        except OSError as exc:
            raise ReplayError(f"{path}: cannot read: {exc}") from None
        if fmt == "auto":
            fmt = next((name for name, mod in PARSERS.items() if any(mod.detect(ln) for ln in head)), None)
            if fmt is None:
                raise ReplayError(f"{path}: no known training-log format in its first {len(head)} lines "
                                  f"(known: {', '.join(PARSERS)}; force one with --format)")
        parser = PARSERS[fmt].Parser()
        engine = Engine(rules)
        result = ReplayResult(path, fmt)
        lineno = 0
        try:
            for lineno, line in enumerate(itertools.chain(head, fh), 1):
                item = parser.feed(line)
                if item is None:
                    result.skipped_lines += 1
                elif isinstance(item, StepRecord):
                    result.records += 1
                    result.last = item
                    engine.observe(item)
                else:
                    engine.report(*item)
        except (EOFError, OSError, zlib.error) as exc:
            raise ReplayError(f"{path}:{lineno + 1}: cannot read on (truncated or corrupt file?): {exc}") from None
        if result.records == 0 and not engine.events:
            raise ReplayError(f"{path}: no {fmt} step lines found in {lineno} lines")
        result.events = engine.events
        return result
