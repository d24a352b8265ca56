"""Loss-scale train-step cells whose overflow check runs on any backend (CPU included).

MindSpore's ``TrainOneStepWithLossScaleCell`` and MindFormers' ``MFTrainOneStepCell`` detect overflow
with Ascend status registers (``NPUGetFloatStatusV2``), which do not exist on CPU. These subclasses
replace only the check: overflow means some gradient element is not finite (``IsFinite``), summed over
data-parallel ranks when the job is distributed, which is what the Ascend INF/NAN mode computes too.
Everything else (loss scaling, skipping the update, outputs) is the parent's code.
"""
from __future__ import annotations

from collections.abc import Callable

import mindspore as ms
from mindspore import Tensor, nn, ops


class FiniteOverflowCheck:
    """Mixin for a ``TrainOneStepWithLossScaleCell`` subclass: portable ``IsFinite`` overflow check."""

    is_distributed: bool  # the cell's own attributes
    allreduce: Callable

    def start_overflow_check(self, pre_cond, compute_input):
        return ops.depend(Tensor(0, ms.float32), pre_cond), compute_input

    def get_overflow_status(self, status, compute_output):
        bad = ops.depend(Tensor(0, ms.float32), status)
        for grad in compute_output:
            bad = bad + ops.logical_not(ops.isfinite(grad)).any().astype(ms.float32)
        if self.is_distributed:
            bad = self.allreduce(bad)
        return bad > 0


class LossScaleTrainStep(FiniteOverflowCheck, nn.TrainOneStepWithLossScaleCell):
    """``TrainOneStepWithLossScaleCell`` with the portable check. Outputs ``(loss, overflow, loss_scale)``."""


def mindformers_train_step(network, optimizer, **kwargs):
    """MindFormers' ``MFTrainOneStepCell`` with the portable check: a
    :class:`training_monitor.callbacks.mf.MFTrainOneStepCellFinite` (needs ``mindformers``).

    Outputs ``(loss, overflow, scaling_sens, learning_rate, global_norm)``; ``kwargs`` go to
    ``MFTrainOneStepCell`` (``use_clip_grad``, ``max_grad_norm``, ``scale_sense``...).
    """
    from .mf import MFTrainOneStepCellFinite

    return MFTrainOneStepCellFinite(network, optimizer, **kwargs)
