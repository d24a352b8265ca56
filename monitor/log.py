"""The project's logger: loguru's, imported on first use (``from training_monitor.log import logger``).

Importing loguru takes about 70 ms, 40 % of a ``monitor replay`` start-up, and most runs log nothing.

A logged exception shows its traceback without variable values (loguru's ``diagnose=False``) and without
the frames above the handler (``backtrace=False``): values would print settings, URLs and tokens. That is
the default of every handler added after this module first logs (``LOGURU_DIAGNOSE``/``LOGURU_BACKTRACE``
unless set), and loguru's own stderr handler is replaced by one with these options, which prints a failure
repeated from the same place once per :data:`REPEAT_WINDOW` (:class:`Repeats`).
"""
from __future__ import annotations

import os
import re
import sys

_stderr_level: str | None = None
_configured = False
REPEAT_WINDOW = 300.0  # seconds: a failure logged again from the same place within this is counted, not printed
MAX_KEYS = 4096  # places and things Repeats remembers
_DIGITS = re.compile(r"0x[0-9a-fA-F]+|\d+")  # numbers and addresses: not what a message is about


class Repeats:
    """A loguru filter for the monitor's stderr handler: a warning or error logged again from the same line of
    code, about the same thing, within :data:`REPEAT_WINDOW` seconds of the last one printed is counted, not
    printed; the next one printed says how many were left out. A broken output folder or alert sink fails at
    every save or send: the first failure says so, later ones do not bury the training's own log. The same
    thing: the message with its numbers masked (``attempt 3`` is ``attempt 4``; ``sink first`` is not
    ``sink second``). Events (records bound ``report=True``, news rather than failures) are always printed.
    Memory: one entry per line of code and thing, at most :data:`MAX_KEYS` (then it starts afresh)."""

    def __init__(self):
        self.seen: dict[tuple, tuple[float, int]] = {}  # (file, line, thing) -> (time printed last, left out since)

    def __call__(self, record) -> bool:
        if record["level"].no < 30 or record["extra"].get("report"):
            return True
        if len(self.seen) >= MAX_KEYS:
            self.seen.clear()
        key = (record["file"].path, record["line"], _DIGITS.sub("#", record["message"]))
        now = record["time"].timestamp()
        last, left_out = self.seen.get(key, (-REPEAT_WINDOW, 0))
        if now - last < REPEAT_WINDOW:
            self.seen[key] = (last, left_out + 1)
            return False
        self.seen[key] = (now, 0)
        if left_out:
            record["message"] += f" (and {left_out} more from the same place in the {now - last:.0f} s before)"
        return True


SAFE: dict = {"diagnose": False, "backtrace": False}


def _loguru():
    global _stderr_level, _configured
    if not _configured:
        os.environ.setdefault("LOGURU_DIAGNOSE", "NO")
        os.environ.setdefault("LOGURU_BACKTRACE", "NO")
    from loguru import logger

    if not _configured:
        _configured = True
        try:
            logger.remove(0)  # loguru's default stderr handler (diagnose on); gone if the program removed it
        except ValueError:
            pass
        else:
            if _stderr_level is None:
                logger.add(sys.stderr, level="DEBUG", filter=Repeats(), **SAFE)
    if _stderr_level is not None:
        logger.remove()
        logger.add(sys.stderr, level=_stderr_level, filter=Repeats(), **SAFE)
        _stderr_level = None
    return logger


class _Logger:
    """Forwards every attribute to ``loguru.logger``, importing it (and applying :func:`to_stderr`) first."""

    def __getattr__(self, name: str):
        return getattr(_loguru(), name)


logger = _Logger()


def to_stderr(level: str) -> None:
    """Log messages of ``level`` and above to stderr only (replacing loguru's handlers): at once when loguru is
    loaded, else when it is."""
    global _stderr_level
    _stderr_level = level
    if "loguru" in sys.modules:  # already loaded: now
        _loguru()
