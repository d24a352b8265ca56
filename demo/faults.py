"""Fault specifications for ``monitor demo --inject KIND@STEP``."""
from __future__ import annotations

from dataclasses import dataclass

KINDS = ("nan", "spike")


@dataclass(frozen=True)
class Fault:
    """A fault to inject: ``kind`` in :data:`KINDS`, at trainer step ``step`` (1-based)."""

    kind: str
    step: int

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """``"nan@150"`` -> ``Fault("nan", 150)``. Raises ValueError with the accepted forms."""
        kind, sep, step = spec.partition("@")
        if not sep or kind not in KINDS or not step.isdigit() or int(step) < 1:
            raise ValueError(f"bad fault {spec!r}: expected KIND@STEP with KIND one of {', '.join(KINDS)} "
                             "and STEP a positive integer, e.g. spike@150")
        return cls(kind, int(step))
