"""Where replayed lines come from: files (plain or gzip), standard input (``-``), folders of per-rank logs.

A folder is searched (recursively) for log files: names ending in ``.log``, ``.txt``, ``.out``, ``.err``,
``.jsonl``, ``.csv`` (also rotated, ``info.log.1``, and gzipped, ``.gz``) and TensorBoard files
(``events.out.tfevents.*``); empty ones are left out. A rotated log and its backups are read as one log, oldest first
(``info.log.2``, ``info.log.1``, ``info.log``); MindFormers' ``error.log`` is left out where an ``info.log``
is beside it (it repeats that log's errors). The rank of a log is taken from its file or folder name
(``rank_3/info.log``, ``worker_3.log``, ``events_rank3.jsonl``), else 0. A file in a folder that cannot be
read (a dangling or looping symlink, a special file, no permission) is reported on its own and the others
are replayed.

Bounds on any input: a line is kept up to :data:`MAX_LINE` bytes and the rest of it skipped and counted
(:class:`BoundedLines`); in gzip input, a line longer than :data:`MAX_LINE_READ` bytes decompressed ends the
file with an error naming the file and line (no text log has one; a gzip bomb does); a log holds at most
:data:`MAX_RANKS` distinct ranks. Only regular files, FIFOs and standard input are read (a FIFO without a
writer reads as empty rather than blocking); devices and sockets are refused. File names are shown with
:func:`shown`, so a name holding a newline or a terminal escape cannot forge a line of the output.
"""
from __future__ import annotations

import codecs
import gzip
import io
import os
import re
import stat
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..log import logger

_LOG_NAME = re.compile(r"\.(?:log|txt|out|err|jsonl|csv)(?:\.\d+)?(?:\.gz)?$|^events\.out\.tfevents\.",
                       re.IGNORECASE)
_RANK = re.compile(r"(?:^|[^a-z])(?:rank|worker|device)[_-]?(\d+)", re.IGNORECASE)
_ROTATED = re.compile(r"^(.+)\.(\d+)$")
_RECORDS = re.compile(r"^records_rank\d+\.csv$")  # the monitor's own record log: the output folder's full view
_EVENTS = re.compile(r"^events_rank\d+\.jsonl$")  # the monitor's own event log
STDIN = "-"
HEAD_BYTES = 8192
MAX_LINE = 1 << 20  # bytes of a line kept; the rest of an over-long line is skipped and counted
MAX_LINE_READ = 64 << 20  # bytes of one line (decompressed) read before the file is given up as not a log
MAX_RANKS = 1024  # distinct ranks in one log
_CHUNK = MAX_LINE // 4  # bytes read at a time: at most one line of a chunk (its first) can be over-long


class SourceError(Exception):
    """A path that cannot be read as a log; the message names it and the reason."""


def _find(view, end: int, start: int = 0) -> int:
    """Index of the first newline in ``view[start:end]``, or -1; reads windows growing from 4 KiB."""
    width = 4096
    while start < end:
        stop = min(end, start + width)
        i = bytes(view[start:stop]).find(b"\n")
        if i >= 0:
            return start + i
        start, width = stop, width * 4
    return -1


def _rfind(view, end: int) -> int:
    """Index of the last newline in ``view[:end]`` (there is one), reading windows back from the end."""
    width, stop = 4096, end
    while stop > 0:
        start = max(stop - width, 0)
        i = bytes(view[start:stop]).rfind(b"\n")
        if i >= 0:
            return start + i
        stop, width = start, width * 4
    return -1


def shown(path: str) -> str:
    """``path`` as printed: unchanged when it is printable, else as a Python string literal (``'a\\nb'``)."""
    return path if path.isprintable() else repr(path)


class BoundedLines(io.RawIOBase):
    """The bytes of a binary stream with every line cut at :data:`MAX_LINE` bytes (its newline kept); a line
    longer than ``max_read`` bytes (:data:`MAX_LINE_READ` for gzip input) ends the stream with an error.

    Attributes:
        cut_lines, cut_bytes: lines cut and the bytes skipped of them (logged as a warning at close).
    Raises (on read):
        SourceError: a line longer than ``max_read`` bytes, naming the file and the line.
    """

    def __init__(self, raw, name: str, owns: bool = True, max_read: float = float("inf")):
        self.raw, self.name, self.owns, self.max_read = raw, name, owns, max_read
        self.line = 0  # bytes of the current line read so far
        self.lineno = 1  # counted only with a finite max_read
        self.cut_lines = self.cut_bytes = 0

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.raw.fileno()

    def readinto(self, buf) -> int:
        """Read into ``buf`` in place (the kernel or gzip fills it: no copy), then cut the first line of what was
        read if it goes past the limit; only that line can (a read is at most a quarter of the limit)."""
        view = memoryview(buf).cast("B")
        while True:
            n = self.raw.readinto(view[:_CHUNK])
            if not n:
                return 0
            room = max(MAX_LINE - self.line, 0)
            nl = _find(view, min(n, room + 1))
            if nl < 0 and n > room:  # the line goes past the limit in this read: skip its rest
                nl = _find(view, n, room + 1)
                head = n if nl < 0 else nl
                if self.line <= MAX_LINE:
                    self.cut_lines += 1
                self.cut_bytes += head - room
                if self.line + head > self.max_read:
                    raise SourceError(f"{shown(self.name)}:{self.lineno}: a line over {int(self.max_read) >> 20} MiB "
                                      "(after decompression): not a text training log")
                self.line += head
                view[room:room + n - head] = bytes(view[head:n])
                n -= head - room
                if nl < 0:
                    if n:
                        return n
                    continue
                nl = room
            if nl < 0:
                self.line += n
                return n
            if self.max_read != float("inf"):  # numbered for the error only: counting costs a copy
                self.lineno += bytes(view[:n]).count(b"\n")
            self.line = n - _rfind(view, n) - 1
            return n

    def close(self) -> None:
        if not self.closed:
            if self.cut_lines:
                logger.warning("{}: {} line(s) longer than {} KiB cut there; {} bytes of them skipped",
                               shown(self.name), self.cut_lines, MAX_LINE >> 10, self.cut_bytes)
            if self.owns:
                self.raw.close()
        super().close()


@dataclass
class Source:
    """One log replayed through one set of engines: a file, a file and its rotated backups, or stdin.
    ``found``: found in a folder (rather than named), so a log that cannot be replayed does not stop the others.
    ``left_out``: the other views of the same run left out beside it (a monitor output folder's event log and
    trainer logs, beside its record log). ``own_events``: this monitor's own event lines in it are reports
    (False beside the monitor's event log ``events_rank<r>.jsonl``, which holds the same events). ``event_log``:
    the monitor's event log of the same rank beside a record log ``records_rank<r>.csv``, whose events found
    outside the step records (the weights check's, the watchdog's) join the replay at their times. ``reached``:
    rank -> the last step that rank's own log in the same folder reached (set for a log whose name gives no rank,
    a launcher's or a scheduler's, replayed after them: a report it makes before a step line of its own is about
    the time after that step)."""

    name: str
    paths: list
    rank: int
    found: bool = False
    left_out: tuple = ()
    own_events: bool = True
    event_log: str | None = None
    reached: dict = field(default_factory=dict)


def is_record_log(path: str) -> bool:
    """``path`` is named as the monitor's own record log (``records_rank<r>.csv``)."""
    return _RECORDS.match(os.path.basename(path)) is not None


def event_log_of(path: str) -> str | None:
    """The event log beside the record log ``path`` (``events_rank<r>.jsonl`` for ``records_rank<r>.csv``) when
    it exists, else None."""
    if not is_record_log(path):
        return None
    name = os.path.basename(path)
    events = os.path.join(os.path.dirname(path), "events_" + name[len("records_"):-len(".csv")] + ".jsonl")
    return events if os.path.isfile(events) else None


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
    groups: dict[str, list[tuple[int, str]]] = {}
    outputs: dict[str, list] = {}  # monitor output folder -> the views left out below it
    evented: set[str] = set()  # folders holding a monitor event log
    unread: list[OSError] = []
    empty = 0  # log files left out for holding nothing
    for folder, dirs, files in os.walk(os.path.normpath(root), onerror=unread.append):
        dirs.sort()
        names = set(files)
        if any(_EVENTS.match(n) for n in names):
            evented.add(folder)
        if any(_RECORDS.match(n) and _has_rows(os.path.join(folder, n)) for n in names):
            outputs[folder] = []
        home = next((o for o in outputs if folder == o or folder.startswith(o + os.sep)), None)
        for name in sorted(files):
            if not _LOG_NAME.search(name) or (name == "error.log" and "info.log" in names):
                continue
            if _empty(os.path.join(folder, name)):
                empty += 1
                continue
            if _RECORDS.match(name) and not _has_rows(os.path.join(folder, name)):
                continue  # a run killed before its first rows reached the file: its other views are replayed
            if home is not None and not (folder == home and _RECORDS.match(name)):
                outputs[home].append(os.path.join(folder, name))
                continue
            m = _ROTATED.match(name)
            base, n = (m.group(1), int(m.group(2))) if m and _LOG_NAME.search(m.group(1)) else (name, 0)
            groups.setdefault(os.path.join(folder, base), []).append((n, os.path.join(folder, name)))
    if unread and unread[0].filename == os.path.normpath(root):
        raise SourceError(f"{shown(root)}: cannot read this folder: {unread[0].strerror}")
    if not groups and empty:
        raise SourceError(f"{shown(root)}: the log files in this folder are empty ({empty})")
    if not groups:
        raise SourceError(f"{shown(root)}: no log files in this folder (looked for *.log, *.txt, *.out, *.err, "
                          "*.jsonl, *.csv, rotated and gzipped ones, events.out.tfevents.*)")
    for exc in unread:  # a subfolder: its logs are not replayed, the others are
        logger.warning("{}: cannot read this folder: {}", shown(exc.filename), exc.strerror)
    sources = []
    for base, members in groups.items():
        paths = [p for _, p in sorted(members, reverse=True)]  # info.log.2, info.log.1, info.log
        name = shown(paths[-1]) if len(paths) == 1 else f"{shown(paths[-1])} (+{len(paths) - 1} rotated)"
        left_out = tuple(outputs.get(os.path.dirname(base), ())) if _RECORDS.match(os.path.basename(base)) else ()
        sources.append(Source(name, paths, rank_of(paths[-1]) or 0, found=True, left_out=left_out,
                              own_events=os.path.dirname(base) not in evented, event_log=event_log_of(base)))
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
            sources.append(Source(shown(p), [p], rank_of(p) or 0, event_log=event_log_of(p)))
    return sources


def _empty(path: str) -> bool:
    """A regular file of 0 bytes (other files, symlinks that lead nowhere included, are kept: reading them
    reports what is wrong)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == 0


class Utf16(io.RawIOBase):
    """The UTF-8 bytes of a UTF-16 stream whose byte-order mark says so (Windows PowerShell's ``python train.py >
    log.txt`` writes UTF-16LE), decoded chunk by chunk; a unit that does not decode is replaced."""

    def __init__(self, raw):
        self.raw = raw
        self.decoder = codecs.getincrementaldecoder("utf-16")("replace")
        self.pending, self.at = b"", 0  # the decoded chunk and how much of it was handed on

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while self.at == len(self.pending):
            chunk = self.raw.read(_CHUNK)
            self.pending, self.at = self.decoder.decode(chunk, final=not chunk).encode("utf-8"), 0
            if not chunk:
                break
        n = min(len(buf), len(self.pending) - self.at)
        memoryview(buf).cast("B")[:n] = memoryview(self.pending)[self.at:self.at + n]
        self.at += n
        return n

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
        super().close()


def _binary(head: bytes) -> bool:
    """Over a tenth of ``head`` control bytes (NUL included; not tab, newline, carriage return, escape): a few
    NULs are a text log's crash padding, not a binary file."""
    return sum(b < 9 or 13 < b < 32 and b != 27 for b in head) > len(head) // 10


def _open(path: str):
    """``path`` opened for binary reading, refusing what is not a regular file or a FIFO."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise SourceError(f"{shown(path)}: dangling symlink (to {shown(os.readlink(path))})") from None
        raise SourceError(f"{shown(path)}: no such file") from None
    except OSError as exc:  # ELOOP: a symlink loop; EACCES
        raise SourceError(f"{shown(path)}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise SourceError(f"{shown(path)}: is a directory, give the log files inside it")
    if stat.S_ISFIFO(st.st_mode):  # opened without waiting for a writer; then reads block as usual
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        return open(fd, "rb")
    if not stat.S_ISREG(st.st_mode):
        raise SourceError(f"{shown(path)}: not a regular file (a device or socket); give a log file")
    return open(path, "rb")


def open_bytes(path: str):
    """A buffered binary stream of ``path`` (stdin for ``-``; gzip undone; lines cut by
    :class:`BoundedLines`), checked to hold text: read it as :func:`text` says.

    Raises:
        SourceError: missing, unreadable, empty, binary or corrupt gzip input, a special file.
    """
    name = "<stdin>" if path == STDIN else shown(path)
    try:
        raw = sys.stdin.buffer if path == STDIN else _open(path)
        if not hasattr(raw, "peek"):
            raw = io.BufferedReader(raw)
        packed = raw.peek(2)[:2] == b"\x1f\x8b"
        if packed:
            raw = io.BufferedReader(gzip.GzipFile(fileobj=raw))
        if raw.peek(2)[:2] in (b"\xff\xfe", b"\xfe\xff"):  # a UTF-16 byte-order mark
            raw = io.BufferedReader(Utf16(raw))
        raw = io.BufferedReader(BoundedLines(raw, path, path != STDIN, MAX_LINE_READ if packed else float("inf")),
                                buffer_size=_CHUNK)
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
    """The ``run`` label of a log: its file name stem, without a compression or rotation suffix
    (``rank_0/info.log.1.gz`` -> ``info``, ``trainer_state.json`` -> ``trainer_state``)."""
    if path == STDIN:
        return "stdin"
    p = Path(path)
    while p.suffix.lower() == ".gz" or p.suffix[1:].isdigit():
        p = p.with_suffix("")
    return p.stem or "run"


def first_bytes(path: str) -> bytes:
    """The first bytes of a file as stored (for recognising a TensorBoard file); b"" when unreadable."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block here, and is read once only
            return b""
        with open(path, "rb") as f:
            return f.read(HEAD_BYTES)
    except OSError:
        return b""
