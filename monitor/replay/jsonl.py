"""JSON Lines with named fields, one step per line (the names of :mod:`.fields`, as in CSV)::

    {"step": 100, "loss": 2.31, "grad_norm": 1.2, "lr": 0.0003, "loss_scale": 65536, "overflow": false}
    {"iteration": 101, "train/loss": "nan", "learning_rate": 3e-4}

A line with no step and loss (an evaluation entry, a config dump) is skipped.
"""
from __future__ import annotations

import json

from . import base
from .base import NOT_JSON
from .fields import canonical, record

NAME = "jsonl"


def json_object(line: str) -> dict | None:
    s = line.strip()
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def detect(line: str) -> bool:
    """True when ``line`` is a JSON object naming a step and a loss."""
    obj = json_object(line)
    return obj is not None and {"step", "loss"} <= {canonical(k) for k in obj if isinstance(k, str)}


class Parser(base.Parser):
    name = NAME

    def parse(self, line):
        obj = json_object(line)
        if obj is None:
            return NOT_JSON if line.strip() else base.BLANK
        return record(((canonical(k), v) for k, v in obj.items()), self.rank)
