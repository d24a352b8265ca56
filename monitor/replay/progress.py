"""A progress bar on stderr while logs are read (tqdm), counting bytes of the files as stored (gzip: compressed)."""
from __future__ import annotations

import os
import sys
from typing import Any

LARGE = 1 << 30  # bytes: a bar even when stderr is not a terminal (a CI log), updated every 30 s
EVERY = 4096  # records between two looks at the read position


class Progress:
    """Bytes read of ``total`` (None for stdin), shown by tqdm on stderr.

    Shown when ``show`` is True, or, with ``show`` None, when stderr is a terminal (and the replay takes
    over a second) or the input is at least :data:`LARGE`. :meth:`reading` is told each file as it is
    opened; :meth:`tick` (every :data:`EVERY` records) reads its descriptor's position, which costs no
    reading and works under gzip (the compressed file's position).
    """

    def __init__(self, paths, show: bool | None = None):
        self.sizes = {p: os.path.getsize(p) if p != "-" and os.path.isfile(p) else None for p in paths}
        sizes = [s for s in self.sizes.values() if s is not None]
        self.total = sum(sizes) if len(sizes) == len(self.sizes) else None
        tty = sys.stderr.isatty()
        if show is None:
            show = tty or (self.total or 0) >= LARGE
        self.bar: Any = None
        if show:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, unit="B", unit_scale=True, unit_divisor=1024, desc="replay",
                            file=sys.stderr, delay=1.0 if tty else 0, mininterval=0.5 if tty else 30,
                            leave=False, dynamic_ncols=True)
        self.done, self.last = 0, 0
        self.fd: int | None = None
        self.path: str | None = None

    def reading(self, path: str, fh=None) -> None:
        """``path`` (open as ``fh``, when a text file) is read next; the one before it is done."""
        if self.bar is None:
            return
        if self.path is not None:
            self.done += self.sizes.get(self.path) or self.last
            self._to(self.done)
        self.path, self.last = path, 0
        try:
            self.fd = fh.fileno()
        except (AttributeError, OSError, ValueError):
            self.fd = None

    def tick(self) -> None:
        if self.bar is None or self.fd is None:
            return
        try:
            self.last = os.lseek(self.fd, 0, os.SEEK_CUR)
        except OSError:  # a pipe
            self.fd = None
            return
        self._to(self.done + self.last)

    def _to(self, position: int) -> None:
        if position > self.bar.n:
            self.bar.update(position - self.bar.n)

    def close(self) -> None:
        """All read: show the bar full, then clear it."""
        if self.bar is not None:
            if self.total:
                self._to(self.total)
                self.bar.refresh()
            self.bar.close()
            self.bar = None
