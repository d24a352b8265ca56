"""The project's logger: loguru's, imported on first use (``from monitor.log import logger``).

Importing loguru takes about 70 ms, 40 % of a ``monitor replay`` start-up, and most runs log nothing.
"""
from __future__ import annotations

import sys

_stderr_level: str | None = None


def _loguru():
    global _stderr_level
    from loguru import logger

    if _stderr_level is not None:
        logger.remove()
        logger.add(sys.stderr, level=_stderr_level)
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
