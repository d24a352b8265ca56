"""Parser for CSV logs with named columns: the monitor's own record log, or any trainer's CSV export.

The header row names the columns; recognised names (case-insensitive) map to :class:`StepRecord`
fields: ``step``/``iteration``/``global_step``, ``loss``/``train_loss``/``lm_loss``, ``grad_norm``/
``global_norm``, ``loss_scale``, ``overflow``, ``lr``/``learning_rate``, ``step_time_s``, ``data_wait_s``,
``tokens``, ``rank``, ``timestamp``, ``steps``, ``mfu``. Other columns are ignored; a row that does not
parse is skipped (and counted).
"""
from __future__ import annotations

import csv

from ..record import StepRecord

NAME = "csv"
ALIASES = {"iteration": "step", "global_step": "step", "train_loss": "loss", "lm_loss": "loss",
           "global_norm": "grad_norm", "learning_rate": "lr"}
KINDS = {"step": int, "rank": int, "steps": int, "tokens": int, "overflow": lambda v: v.lower() in ("true", "1")}


def _columns(line: str) -> list[str] | None:
    names = [ALIASES.get(n.strip().lower(), n.strip().lower()) for n in next(csv.reader([line]), [])]
    return names if "step" in names and "loss" in names else None


def detect(line: str) -> bool:
    """True when ``line`` is a CSV header naming a step and a loss column."""
    return "," in line and _columns(line) is not None


class Parser:
    name = NAME

    def __init__(self):
        self.columns: list[str] | None = None

    def feed(self, line: str):
        if self.columns is None:
            self.columns = _columns(line)
            return None
        values = next(csv.reader([line]), [])
        if len(values) != len(self.columns):
            return None
        fields = {}
        try:
            for name, text in zip(self.columns, values):
                if name in StepRecord.__dataclass_fields__ and text.strip() not in ("", "None"):
                    fields[name] = KINDS.get(name, float)(text.strip())
        except ValueError:
            return None
        return StepRecord(**fields) if "step" in fields else None
