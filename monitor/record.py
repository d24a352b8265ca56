"""The unit every feed produces and every consumer reads: one training step (or one sink of steps)."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class StepRecord:
    """What one optimizer step (or, in sink mode, the last of ``steps`` steps) reported.

    Attributes:
        step: global step number after this step, 1-based. Goes back after a rollback or resume.
        loss: training loss (nats per token as the trainer reports it); None when the trainer gave none.
        grad_norm: global L2 norm of the gradients before clipping; None when not computed.
        loss_scale: dynamic/static loss scale in use for this step; None without loss scaling.
        overflow: True when the gradients overflowed and the update was skipped; None when unknown.
        lr: learning rate used by this step's update.
        step_time_s: wall time of the step in seconds (per step: a sink's time divided by ``steps``).
        data_wait_s: seconds between the previous step's end and this step's start (non-sink mode).
        tokens: tokens consumed by this step over all data-parallel ranks (global batch x sequence).
        rank: rank that produced the record.
        timestamp: Unix time in seconds when the step finished; None when unknown.
        steps: how many optimizer steps this record covers (sink size in sink mode, else 1).
        mfu: model FLOPs utilisation of the step, 0..1 (:mod:`training_monitor.flops`); None when unknown.
        slow_reason: why the step is known to have been slow, when it is (``checkpoint``: a checkpoint
            was saved since the previous step; ``rollback``: the monitor restored one; ``resume``: the first
            step of a process that took up the run from a checkpoint (:mod:`training_monitor.resume`);
            ``epoch``: an epoch ended, with its callbacks, evaluation and the data pipeline's restart); None
            otherwise. The throughput rules do not judge such a step.
        callbacks_s: seconds the callbacks listed after the monitor took at the end of the previous step
            (host time between the steps that is not waiting for data); None when unknown. The throughput
            rule counts it in the step's period, as it counts the data wait.
        samples: samples (sequences, images) consumed by this step over all data-parallel ranks; None when
            unknown (the throughput rule judges samples/s when the record has no tokens).
        overflows: how many steps overflowed since the previous record (its step excluded) up to this one, when
            the trainer counts them (Megatron's skipped iterations of the logged interval, DeepSpeed's running
            ``skipped`` count, a printed share of the steps since its last print); None when unknown (then
            ``overflow`` says whether this step overflowed).
        overflow_applied: True when this step overflowed and the trainer applied its update all the same
            (MindYOLO's and mindcv's ``overflow_still_update``): non-finite gradients went into the weights.
        loss_scale_next: the loss scale the trainer set for the step after this one when it says so (DeepSpeed's
            ``Attempted loss scale: 2, reducing to 1``: ``loss_scale`` 2, ``loss_scale_next`` 1); None when unknown.
        trainer_step: the trainer's own number of the step when it is not ``step`` (the monitor's): after a
            rollback, which the trainer's count goes on through, or in a resumed process counting its own way;
            None when they are the same. Events carry it (:attr:`~training_monitor.events.Event.trainer_step`).
    """

    # the order of the fields is relied upon: training_monitor.callbacks.TrainingMonitor and the MindFormers log reader
    # (monitor/replay/mindformers.py) build records positionally, the cheapest way per step
    step: int
    loss: float | None = None
    grad_norm: float | None = None
    loss_scale: float | None = None
    overflow: bool | None = None
    lr: float | None = None
    step_time_s: float | None = None
    data_wait_s: float | None = None
    tokens: int | None = None
    rank: int = 0
    timestamp: float | None = None
    steps: int = 1
    mfu: float | None = None
    slow_reason: str | None = None
    callbacks_s: float | None = None
    samples: int | None = None
    overflows: int | None = None
    overflow_applied: bool | None = None
    loss_scale_next: float | None = None
    trainer_step: int | None = None

    @property
    def period_s(self) -> float | None:
        """The step's whole period in seconds, from the end of the step before (its last callback's) to this
        step's end: ``step_time_s + data_wait_s + callbacks_s`` (the unknown ones 0); None without a step time."""
        if not self.step_time_s:
            return None
        return self.step_time_s + (self.data_wait_s or 0.0) + (self.callbacks_s or 0.0)

    @property
    def tokens_per_second(self) -> float | None:
        """TPS over the step's whole period (:attr:`period_s`): ``tokens / period_s`` (global over the data-parallel
        ranks; a starved input pipeline or slow callbacks lower it, and MFU with it); None when unknown."""
        period = self.period_s
        return self.tokens / period if self.tokens and period is not None else None

    def to_dict(self) -> dict:
        return asdict(self)
