"""Named fields -> :class:`StepRecord` fields: the one alias table of the CSV, JSONL and TensorBoard readers.

A name is matched case-insensitively, with ``-`` and spaces read as ``_`` and a ``train/`` prefix dropped,
so ``lm loss``, ``train/loss``, ``grad-norm``, ``loss-scale``, ``learning-rate`` and ``iteration-time`` all
find their field. Names that are StepRecord fields (``step_time_s``, ``data_wait_s``, ``tokens``, ``rank``,
``timestamp``, ``steps``, ``mfu``, ...) map to themselves; any other name is ignored.
"""
from __future__ import annotations

from ..record import StepRecord
from .base import NO_LOSS, NO_STEP, NUMBER

ALIASES = {
    "iteration": "step", "global_step": "step", "iter": "step", "iter_num": "step", "_step": "step",
    "train_loss": "loss", "lm_loss": "loss",
    "global_norm": "grad_norm",
    "learning_rate": "lr",
    "iteration_time": "step_time_s",  # Megatron's and MindFormers' TensorBoard scalar, in seconds
}
FIELDS = frozenset(StepRecord.__dataclass_fields__)


def _truth(v) -> bool:
    return v if isinstance(v, bool) else str(v).strip().lower() in ("true", "1", "1.0")


def _integer(v) -> int:
    f = float(v)
    if not f.is_integer():
        raise ValueError(f"not an integer: {v!r}")
    return int(f)


KINDS = {"step": _integer, "rank": _integer, "steps": _integer, "tokens": _integer, "overflow": _truth,
         "slow_reason": str}


def canonical(name: str) -> str:
    """The StepRecord field ``name`` stands for (or ``name`` normalised, when it stands for none)."""
    n = name.strip().lower().replace("-", "_").replace(" ", "_")
    n = n.removeprefix("train/")
    return ALIASES.get(n, n)


def record(pairs, rank: int = 0, need_loss: bool = True) -> StepRecord | str:
    """A StepRecord from ``(name, value)`` pairs whose names are canonical, or the reason there is none.

    Values may be numbers, booleans or text (``"nan"`` included); None and empty text mean unknown. With
    ``need_loss`` a row without a loss is not a record (it holds some other metric).
    """
    fields = {}
    try:
        for name, value in pairs:
            if name in FIELDS and value is not None and value != "" and value != "None":
                fields[name] = KINDS.get(name, float)(value)
    except (ValueError, TypeError, OverflowError):
        return NUMBER
    if "step" not in fields:
        return NO_STEP
    if need_loss and "loss" not in fields:
        return NO_LOSS
    fields.setdefault("rank", rank)
    return StepRecord(**fields)
