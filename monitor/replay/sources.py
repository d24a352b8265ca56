"""Where replayed lines come from: files (plain or gzip), standard input (``-``), folders of per-rank logs.

A folder is searched (recursively) for log files: names ending in ``.log``, ``.txt``, ``.out``, ``.err``,
``.jsonl``, ``.csv`` (also rotated, ``info.log.1``, and gzipped, ``.gz``) and TensorBoard files
(``events.out.tfevents.*``); empty ones are left out. A rotated log and its backups are read as one log, oldest first
(``info.log.2``, ``info.log.1``, ``info.log``); MindFormers' ``error.log`` is left out where an ``info.log``
is beside it (it repeats that log's errors). The rank of a log is taken from its file or folder name
(``rank_3/info.log``, ``worker_3.log``, ``events_rank3.jsonl``), else 0.
"""
from __future__ import annotations

import gzip
import io
import os
import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

_LOG_NAME = re.compile(r"\.(?:log|txt|out|err|jsonl|csv)(?:\.\d+)?(?:\.gz)?$|^events\.out\.tfevents\.",
                       re.IGNORECASE)
_RANK = re.compile(r"(?:^|[^a-z])(?:rank|worker|device)[_-]?(\d+)", re.IGNORECASE)
_ROTATED = re.compile(r"^(.+)\.(\d+)$")
_RECORDS = re.compile(r"^records_rank\d+\.csv$")  # the monitor's own record log: the output folder's full view
STDIN = "-"
HEAD_BYTES = 8192
_LOG_SUFFIXES = {".gz", ".log", ".txt", ".out", ".err", ".csv", ".jsonl"}


class SourceError(Exception):
    """A path that cannot be read as a log; the message names it and the reason."""


@dataclass
class Source:
    """One log replayed through one set of engines: a file, a file and its rotated backups, or stdin.
    ``found``: found in a folder (rather than named), so a log that cannot be replayed does not stop the others.
    ``left_out``: the other views of the same run left out beside it (a monitor output folder's event log and
    trainer logs, beside its record log)."""

    name: str
    paths: list
    rank: int
    found: bool = False
    left_out: tuple = ()


def rank_of(path: str) -> int | None:
    """The rank a path names (file name first, then up to three parent folders), or None."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    for part in reversed(parts[-4:]):
        m = _RANK.search(part)
        if m is not None:
            return int(m.group(1))
    return None


def _has_rows(path: str) -> bool:
    """True when a record log holds a row below its header."""
    try:
        with open(path, "rb") as f:
            return bool(f.readline(1 << 16)) and bool(f.readline(1 << 16).strip())
    except OSError:
        return False


def _folder(root: str) -> list[Source]:
    """The logs below ``root``. A monitor output folder (one holding a ``records_rank<r>.csv`` with rows) is
    replayed from its record logs, every step as the live engine saw it; its event logs and the trainer logs
    below it are other views of the same run, left out (named in ``left_out``). A record log without rows
    (a run killed before its first rows were written) is left out instead, and the other views replayed."""
    groups: dict[str, list] = {}
    outputs: dict[str, list] = {}  # monitor output folder -> the views left out below it
    for folder, dirs, files in os.walk(os.path.normpath(root)):
        dirs.sort()
        names = set(files)
        if any(_RECORDS.match(n) and _has_rows(os.path.join(folder, n)) for n in names):
            outputs[folder] = []
        home = next((o for o in outputs if folder == o or folder.startswith(o + os.sep)), None)
        for name in sorted(files):
            if not _LOG_NAME.search(name) or (name == "error.log" and "info.log" in names) or \
                    os.path.getsize(os.path.join(folder, name)) == 0:
                continue
            if _RECORDS.match(name) and not _has_rows(os.path.join(folder, name)):
                continue  # a run killed before its first rows reached the file: its other views are replayed
            if home is not None and not (folder == home and _RECORDS.match(name)):
                outputs[home].append(os.path.join(folder, name))
                continue
            m = _ROTATED.match(name)
            base, n = (m.group(1), int(m.group(2))) if m and _LOG_NAME.search(m.group(1)) else (name, 0)
            groups.setdefault(os.path.join(folder, base), []).append((n, os.path.join(folder, name)))
    if not groups:
        raise SourceError(f"{root}: no log files in this folder (looked for *.log, *.txt, *.out, *.err, *.jsonl, "
                          "*.csv, rotated and gzipped ones, events.out.tfevents.*)")
    sources = []
    for base, files in groups.items():
        paths = [p for _, p in sorted(files, reverse=True)]  # info.log.2, info.log.1, info.log
        name = paths[-1] if len(paths) == 1 else f"{paths[-1]} (+{len(paths) - 1} rotated)"
        left_out = tuple(outputs.get(os.path.dirname(base), ())) if _RECORDS.match(os.path.basename(base)) else ()
        sources.append(Source(name, paths, rank_of(paths[-1]) or 0, found=True, left_out=left_out))
    return sorted(sources, key=lambda s: (s.rank, s.name))


def expand(paths) -> list[Source]:
    """The sources the command-line paths stand for, in order."""
    sources = []
    for p in paths:
        if p == STDIN:
            sources.append(Source("<stdin>", [STDIN], 0))
        elif os.path.isdir(p):
            sources.extend(_folder(p))
        else:
            sources.append(Source(p, [p], rank_of(p) or 0))
    return sources


def _binary(head: bytes) -> bool:
    return b"\x00" in head or sum(b < 9 or 13 < b < 32 and b != 27 for b in head) > len(head) // 10


def open_bytes(path: str):
    """A buffered binary stream of ``path`` (stdin for ``-``; gzip undone), checked to hold text: read it as
    :func:`text` says.

    Raises:
        SourceError: missing, unreadable, empty, binary or corrupt gzip input.
    """
    name = "<stdin>" if path == STDIN else path
    if path != STDIN and not os.path.exists(path):
        raise SourceError(f"{path}: no such file")
    if os.path.isdir(path):
        raise SourceError(f"{path}: is a directory, give the log files inside it")
    try:
        raw = sys.stdin.buffer if path == STDIN else open(path, "rb")
        if not hasattr(raw, "peek"):
            raw = io.BufferedReader(raw)
        if raw.peek(2)[:2] == b"\x1f\x8b":
            raw = io.BufferedReader(gzip.GzipFile(fileobj=raw))
        head = raw.peek(HEAD_BYTES)[:HEAD_BYTES]
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise SourceError(f"{name}: truncated or corrupt gzip file ({exc})") from None
    except OSError as exc:
        raise SourceError(f"{name}: cannot read: {exc.strerror or exc}") from None
    problem = "empty " + ("input" if path == STDIN else "file") if not head else \
        "binary file, not a text training log" if _binary(head) else None
    if problem:
        if path != STDIN:
            raw.close()
        raise SourceError(f"{name}: {problem}")
    return raw


def text(raw) -> io.TextIOWrapper:
    """The text of a stream from :func:`open_bytes`: UTF-8 with bad bytes replaced, any newline convention
    (``\\n``, ``\\r\\n``, a lone ``\\r`` of a progress bar)."""
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)


def text_lines(line: bytes) -> list[str]:
    """The lines of :func:`text` in ``line``, one line of the binary stream (up to and with its ``\\n``): one,
    or more where a lone ``\\r`` ends some."""
    decoded = line.decode("utf-8", "replace")
    return list(io.StringIO(decoded, newline=None)) if "\r" in decoded else [decoded]


def default_run(path: str) -> str:
    """The ``run`` label of a log: its file name without the log suffixes (``rank_0/info.log.1.gz`` -> ``info``)."""
    if path == STDIN:
        return "stdin"
    p = Path(path)
    while p.suffix and (p.suffix.lower() in _LOG_SUFFIXES or p.suffix[1:].isdigit()):
        p = p.with_suffix("")
    return p.name or "run"


def first_bytes(path: str) -> bytes:
    """The first bytes of a file as stored (for recognising a TensorBoard file); b"" when unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read(HEAD_BYTES)
    except OSError:
        return b""
