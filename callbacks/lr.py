"""Learning-rate scaling that takes effect inside compiled graphs.

A MindSpore/MindFormers ``LearningRateSchedule`` bakes its peak LR into the graph as a Python float,
so it cannot be lowered in place. :class:`ScaledLearningRate` multiplies any schedule by a non-trainable
``Parameter``; a rollback changes that parameter, and the next optimizer update uses the new LR
without recompiling. A fixed LR is already a ``Parameter`` in MindSpore optimizers and is scaled directly.
"""
from __future__ import annotations

from collections.abc import Callable

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops


class PerStepLearningRate(nn.learning_rate_schedule.LearningRateSchedule):
    """A list of per-step learning rates (``nn.cosine_decay_lr(..)``, ``nn.piecewise_constant_lr(..)``, what
    MindSpore's tutorials give an optimizer) as a schedule cell: the value at ``global_step``, the last one
    past the end (an optimizer given the list reads it the same way, without the clamp).

    Args:
        values: the learning rate of each step, a sequence of floats (at least one).
    Raises:
        ValueError: an empty sequence.
    """

    def __init__(self, values):
        super().__init__()
        values = [float(v) for v in values]
        if not values:
            raise ValueError("PerStepLearningRate: no learning rate given")
        self.values = Tensor(values, ms.float32)
        self.last = len(values) - 1

    def construct(self, global_step):
        return self.values[ops.minimum(global_step, self.last)]


class ScaledLearningRate(nn.learning_rate_schedule.LearningRateSchedule):
    """``schedule(step) * scale``, with ``scale`` a non-trainable float32 ``Parameter``.

    Args:
        schedule: a ``LearningRateSchedule`` cell (MindSpore's or MindFormers'), a list of per-step learning
            rates (``nn.cosine_decay_lr(..)``: :class:`PerStepLearningRate`), or a MindFormers LR config
            mapping (``{"type": "CosineWithWarmUpLR", ...}``), built with MindFormers' ``build_lr``; so a
            MindFormers YAML can say ``lr_schedule: {type: ScaledLearningRate, schedule: {type: ...}}``
            (after ``training_monitor.callbacks.register_mindformers()``).
        scale: initial multiplier (1.0).
        **settings: schedule settings given to the wrapper, such as the ``total_steps`` (and ``warmup_steps``,
            ``learning_rate``) that MindFormers' Trainer writes into the top-level ``lr_schedule``: each fills
            the key of the ``schedule`` mapping when that key is missing, null or -1 (the Trainer's own rule:
            an explicit value wins).

    Raises:
        TypeError: ``settings`` given with a ``schedule`` that is already a cell (they cannot reach it).
    """

    def __init__(self, schedule, scale: float = 1.0, **settings):
        super().__init__()
        if isinstance(schedule, dict):
            from mindformers.core.lr import build_lr

            schedule = dict(schedule)
            schedule.update({k: v for k, v in settings.items() if schedule.get(k) in (None, -1)})
            schedule = build_lr(schedule)
        elif isinstance(schedule, (list, tuple)) and not settings:
            schedule = PerStepLearningRate(schedule)
        elif settings:
            raise TypeError(f"ScaledLearningRate: {', '.join(settings)} cannot be given to a schedule that is "
                            f"already built ({type(schedule).__name__}); give the schedule as a mapping")
        self.schedule = schedule
        self.scale = Parameter(Tensor(scale, ms.float32), name="monitor_lr_scale", requires_grad=False)

    def construct(self, global_step):
        return self.schedule(global_step) * self.scale


def schedule_scales(train_network) -> list:
    """The ``scale`` parameter of every :class:`ScaledLearningRate` inside ``train_network``."""
    return [c.scale for _, c in train_network.cells_and_names() if isinstance(c, ScaledLearningRate)]


def lr_scale_parameters(train_network, optimizer) -> list:
    """The parameters whose value multiplies the optimizer's LR: the ``scale`` of every
    :class:`ScaledLearningRate` inside ``train_network`` (MindFormers keeps a second copy of the schedule
    in its train-step cell for logging), or, with a fixed LR, the optimizer's ``learning_rate``.

    Raises:
        TypeError: the LR is a schedule not wrapped in :class:`ScaledLearningRate` (it cannot change in place).
    """
    scales = schedule_scales(train_network)
    if scales:
        return scales
    if isinstance(optimizer.learning_rate, Parameter) and not optimizer.dynamic_lr:
        return [optimizer.learning_rate]
    raise TypeError(f"cannot scale a {type(optimizer.learning_rate).__name__} learning rate in place: wrap the "
                    "schedule, or the list of per-step rates, in training_monitor.callbacks.ScaledLearningRate (a "
                    "MindFormers YAML: `lr_schedule: {type: ScaledLearningRate, schedule: {type: ..}}`) or use a "
                    "fixed (Parameter) learning rate")


def set_lr_scale(params: list, value: float) -> None:
    """Set every parameter from :func:`lr_scale_parameters` to ``value``.

    Uses ``ops.assign``: ``Parameter.set_data`` on these scalars is not seen by an already compiled graph.
    """
    for p in params:
        ops.assign(p, Tensor(value, p.dtype))


def lr_reader(optimizer) -> Callable[[], float | None] | None:
    """A host-side reader of the LR of the optimizer's last update, for train-step cells that do not output it
    (``TrainOneStepCell``, ``TrainOneStepWithLossScaleCell``).

    A fixed (``Parameter``) LR is read once. A per-step table (the list or 1-D tensor of ``nn.cosine_decay_lr(..)``
    given to the optimizer, or a :class:`ScaledLearningRate` over one) is copied to the host once and indexed by
    the optimizer's ``global_step`` (updates applied: an update skipped on overflow does not move it), read after
    each step as the loss is (a 4-byte copy of a finished step's parameter), times the current scale. Past the
    end of the table: the last value when the schedule clamps (:class:`PerStepLearningRate`), else None (the
    optimizer's own gather reads out of range). None for a schedule computed in the graph (``nn.CosineDecayLR``, a
    MindFormers schedule: only the graph's outputs hold its value) and for group LRs: no LR is recorded.
    """
    lr = getattr(optimizer, "learning_rate", None)
    if isinstance(lr, Parameter) and not optimizer.dynamic_lr:
        value = float(lr.asnumpy())
        return lambda: value
    if not getattr(optimizer, "dynamic_lr", False) or getattr(optimizer, "is_group_lr", False):
        return None
    scales = []
    while isinstance(lr, ScaledLearningRate):
        scales.append(lr.scale)
        lr = lr.schedule
    if isinstance(lr, PerStepLearningRate):
        table, clamp = lr.values.asnumpy(), True
    else:
        values = getattr(lr, "learning_rate", None)  # MindSpore's own wrapper of a per-step tensor
        if not isinstance(values, Parameter) or values.ndim != 1:
            return None
        table, clamp = values.asnumpy(), False
    step, last = optimizer.global_step, len(table) - 1

    def read() -> float | None:
        i = int(step.item()) - 1
        if i < 0 or (i > last and not clamp):
            return None
        value = float(table[min(i, last)])
        for scale in scales:
            value *= float(scale.item())
        return value

    return read
