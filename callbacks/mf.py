"""MindFormers-only pieces (importing this module imports ``mindformers``, about 10 s)."""
from mindformers.wrapper import MFTrainOneStepCell

from .cpu import FiniteOverflowCheck


class MFTrainOneStepCellFinite(FiniteOverflowCheck, MFTrainOneStepCell):
    """MindFormers' ``MFTrainOneStepCell`` with the portable ``IsFinite`` overflow check (runs on CPU).

    Outputs ``(loss, overflow, scaling_sens, learning_rate, global_norm)``; the arguments are
    ``MFTrainOneStepCell``'s (``use_clip_grad``, ``max_grad_norm``, ``scale_sense``...). Registered as a
    MindFormers wrapper, so a YAML can say ``runner_wrapper: {type: MFTrainOneStepCellFinite, ...}``.
    """
