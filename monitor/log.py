"""The project's logger: loguru's, imported on first use (``from training_monitor.log import logger``).

Importing loguru takes about 70 ms, 40 % of a ``monitor replay`` start-up, and most runs log nothing.

A logged exception shows its traceback without variable values (loguru's ``diagnose=False``) and without
the frames above the handler (``backtrace=False``): values would print settings, URLs and tokens. That is
the default of every handler added after this module first logs (``LOGURU_DIAGNOSE``/``LOGURU_BACKTRACE``
unless set), and loguru's own stderr handler is replaced by one with these options.
"""
from __future__ import annotations

import os
import sys

_stderr_level: str | None = None
_configured = False
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
                logger.add(sys.stderr, level="DEBUG", **SAFE)
    if _stderr_level is not None:
        logger.remove()
        logger.add(sys.stderr, level=_stderr_level, **SAFE)
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
