"""TensorBoard event files (``events.out.tfevents.*``), read with TensorBoard's own ``EventFileLoader``
(``pip install 'training-monitor[replay]'``).

The scalars of one step, consecutive in the file, make one record; their tags are matched by the names of
:mod:`.fields`: MindFormers' and Megatron's ``loss``/``lm loss``, ``grad-norm``, ``loss-scale``,
``learning-rate``, ``iteration-time`` (seconds); Hugging Face's ``train/loss``, ``train/grad_norm``,
``train/learning_rate``; plain ``loss``, ``lr``. Scalars written as ``simple_value`` (tensorboardX, PyTorch)
and as scalar tensors (TensorFlow 2 summaries) are both read. Other tags, the ``.. vs samples`` copies and
non-scalar events are skipped as ``other tag``; a step whose scalars hold no loss as a line without loss.
The units counted as lines are these steps and skipped events.
"""
from __future__ import annotations

import os

from . import base
from .base import OTHER_TAG
from .fields import FIELDS, canonical, record

NAME = "tensorboard"
MAGIC = b"brain.Event:"  # the file_version of the first event of every event file


def detect(line) -> bool:
    """Never: an event file is recognised by its name or first bytes (:func:`is_event_file`)."""
    return False


def is_event_file(path: str, head: bytes) -> bool:
    return os.path.basename(path).startswith("events.out.tfevents.") or MAGIC in head[:128]


def _scalar(value):
    if value.HasField("simple_value"):
        return value.simple_value
    if value.HasField("tensor") and value.metadata.plugin_data.plugin_name == "scalars":
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(value.tensor)
        return float(array.reshape(-1)[0]) if array.size == 1 else None
    return None


def read(path: str):
    """The file's units: ``{"step", "wall_time", "values"}`` per step, or the skip reason of an event.

    Raises:
        ImportError: TensorBoard is not installed.
    """
    try:
        from tensorboard.backend.event_processing.event_file_loader import (
            EventFileLoader,
        )
    except ImportError:
        raise ImportError("reading TensorBoard files needs the tensorboard package: "
                          "pip install 'training-monitor[replay]'") from None
    group = None
    for event in EventFileLoader(path).Load():
        known = {}
        for v in event.summary.value if event.HasField("summary") else ():
            name = canonical(v.tag)
            if name in FIELDS and " vs " not in v.tag:
                x = _scalar(v)
                if x is not None:
                    known[name] = x
        if not known:
            yield OTHER_TAG
        elif group is not None and group["step"] == event.step:
            group["values"].update(known)
        else:
            if group is not None:
                yield group
            group = {"step": event.step, "wall_time": event.wall_time, "values": known}
    if group is not None:
        yield group


class Parser(base.Parser):
    name = NAME

    def parse(self, item):
        if isinstance(item, str):
            return item
        values = {"timestamp": item["wall_time"], **item["values"], "step": item["step"]}
        return record(values.items(), self.rank)
