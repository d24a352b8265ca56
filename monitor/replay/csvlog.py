"""CSV logs with named columns: the monitor's own record log (``records_rank<r>.csv``), or any trainer's CSV
export. The header row names the columns (the names of :mod:`.fields`; an epoch column is the step when no column
names one: a row per epoch); other columns are ignored::

    step,loss,grad_norm,loss_scale,overflow,lr,step_time_s,data_wait_s,tokens,rank,timestamp,steps,mfu
    1,10.62,1.53,65536.0,False,1e-05,0.41,0.002,16384,0,1714550400.1,1,

Lines before the header, a repeated header, rows with the wrong number of cells or an unreadable cell are
skipped (and counted). A row with an empty loss is a step without a loss, as the live run saw it.
"""
from __future__ import annotations

import csv

from . import base
from .base import HEADER, NO_STEP
from .fields import LOSS_PART, PPL, canonical, record, resolve

NAME = "csv"


def _cells(line: str) -> list[str]:
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return []


def _columns(line: str) -> list[str] | None:
    names = resolve([canonical(n) for n in _cells(line)])
    if "step" not in names and names.count("epoch") == 1:  # a row per epoch: Keras' CSVLogger, Ultralytics'
        names[names.index("epoch")] = "step"  # results.csv, timm's summary.csv count their rows in epochs
    return names if "step" in names and ("loss" in names or LOSS_PART in names or PPL in names) else None


def detect(line: str) -> bool:
    """True when ``line`` is a CSV header naming a step and a loss column (the line's loss chosen as in a text
    line, :func:`.fields.resolve`)."""
    return "," in line and "loss" in line.lower() and _columns(line) is not None


class Parser(base.Parser):
    name = NAME

    def __init__(self, rank: int = 0, times: bool = True):
        super().__init__(rank, times)
        self.columns: list[str] | None = None
        self.header = ""

    def parse(self, line):
        if self.columns is None:
            self.columns = _columns(line)
            if self.columns is not None:
                self.header = line.strip()
                return HEADER
            return NO_STEP if line.strip() else base.BLANK
        if not line.strip():
            return base.BLANK
        if line.strip() == self.header:
            return HEADER
        values = _cells(line)
        if len(values) != len(self.columns):
            return base.CELLS
        return record(zip(self.columns, (v.strip() for v in values)), self.rank, need_loss=False)
