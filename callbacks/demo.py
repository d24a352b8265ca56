"""``monitor demo``: a real MindSpore training run on CPU with the monitor attached and faults injected.

Trains :class:`training_monitor.callbacks.tinylm.TinyLM` on real English text. With MindFormers installed the step cell
is MindFormers' ``MFTrainOneStepCell`` (with the portable overflow check) and MindFormers'
``MFLossMonitor`` writes its own log beside the monitor's, which ``monitor replay`` reads.

Faults are real changes to the training, made by :class:`FaultInjector`:

* ``nan@S``: the batch consumed at step S carries a NaN in its loss mask (a corrupted sample), so the
  loss and every gradient of that step are NaN.
* ``spike@S``: the learning rate is multiplied by ``SURGE`` for the updates of ``SURGE_STEPS`` steps from
  step S (a bad LR schedule edit), which throws the weights off: the loss spikes from step S + 1.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.train import Callback, Model

from training_monitor.demo.faults import Fault

from .cpu import LossScaleTrainStep, mindformers_train_step
from .lr import ScaledLearningRate
from .tinylm import ByteWindows, TinyLM, load_corpus, make_dataset
from .training_monitor import TrainingMonitor

SURGE, SURGE_STEPS = 100.0, 3
SEQ_LEN, BATCH = 64, 8


class SurgeLR(nn.learning_rate_schedule.LearningRateSchedule):
    """Linear warm-up then cosine decay, times a ``surge`` parameter the fault injector can raise."""

    def __init__(self, peak: float, warmup: int, total: int):
        super().__init__()
        self.warmup = nn.WarmUpLR(peak, max(warmup, 1))
        self.decay = nn.CosineDecayLR(peak * 0.1, peak, max(total - warmup, 1))
        self.warmup_steps = warmup
        self.surge = Parameter(Tensor(1.0, ms.float32), name="demo_lr_surge", requires_grad=False)

    def construct(self, global_step):
        if global_step < self.warmup_steps:
            lr = self.warmup(global_step)
        else:
            lr = self.decay(global_step - self.warmup_steps)
        return lr * self.surge


class FaultInjector(Callback):
    """Applies ``faults`` at the trainer's step numbers (the count of steps run, rollbacks included)."""

    def __init__(self, faults: list[Fault], source: ByteWindows, schedule: SurgeLR):
        super().__init__()
        self.faults, self.schedule = faults, schedule
        for f in faults:
            if f.kind == "nan":
                source.poison.add(f.step - 1)  # batch i is consumed by step i + 1

    def on_train_step_begin(self, run_context):
        step = run_context.original_args().cur_step_num  # already the number of the step about to run
        for f in self.faults:
            if f.kind == "spike" and step == f.step:
                ops.assign(self.schedule.surge, Tensor(SURGE, ms.float32))
            if f.kind == "spike" and step == f.step + SURGE_STEPS:
                ops.assign(self.schedule.surge, Tensor(1.0, ms.float32))


MARKER = ".monitor-demo"


def _fresh_output_dir(out: Path) -> Path:
    """Empty ``out`` for a new demo run: only a folder an earlier demo made (it holds :data:`MARKER`) is
    cleared; any other non-empty folder is refused (ValueError), so nothing of the user's is deleted."""
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise ValueError(f"{out}: not empty and not made by 'monitor demo'; choose another --output-dir")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by monitor demo; cleared by the next demo run\n")
    return out


def run_demo(steps: int = 300, faults: Sequence[Fault] = (), port: int | None = 9400, data: str | None = None,
             output_dir: str = "demo_output", use_mindformers: bool | None = None, seed: int = 0,
             checkpoint_every: int = 25, alerts: str | None = None, file_sd_dir: str | None = None,
             peak_tflops: float | None = None) -> dict:
    """Train ``steps`` steps and return the summary (the ``monitor demo --json`` object). ``alerts``: a
    YAML file of alert settings (see :class:`training_monitor.alerts.AlertsConfig`), or None; ``file_sd_dir``,
    ``peak_tflops``: as :class:`~training_monitor.config.MonitorConfig`'s.

    ``output_dir`` is cleared first when an earlier demo made it (see :func:`_fresh_output_dir`).

    Raises:
        ValueError: ``data`` has under 1 kB of text; ``output_dir`` holds something else.
    """
    out = _fresh_output_dir(Path(output_dir))
    if use_mindformers is None:
        use_mindformers = importlib.util.find_spec("mindformers") is not None
    if use_mindformers:  # MindFormers writes its logs where these say, at import time
        os.environ.setdefault("LOG_MF_PATH", str(out / "mindformers_log"))
        os.environ.setdefault("LOCAL_DEFAULT_PATH", str(out / "mindformers_output"))
        from mindformers.core.callback import MFLossMonitor  # before set_context: its import resets the mode

        from training_monitor import callbacks as package
        package.register_mindformers()
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(seed)
    source = ByteWindows(load_corpus(data), SEQ_LEN, BATCH, steps, seed)
    net = TinyLM(seq_len=SEQ_LEN)
    schedule = SurgeLR(1e-3, warmup=20, total=steps)
    opt = nn.AdamWeightDecay(net.trainable_params(), learning_rate=ScaledLearningRate(schedule), weight_decay=0.01)
    scale = nn.DynamicLossScaleUpdateCell(2.0 ** 12, 2, 200)
    monitor = TrainingMonitor(run="demo", output_dir=str(out), metrics_port=port,
                              checkpoint_every=checkpoint_every, healthy_after=20,
                              tokens_per_step=BATCH * SEQ_LEN, exit_on_stop=False, alerts=alerts,
                              file_sd_dir=file_sd_dir, peak_tflops=peak_tflops,
                              n_params=sum(p.size for p in net.trainable_params()))
    callbacks = [FaultInjector(list(faults), source, schedule), monitor]
    if use_mindformers:
        train = mindformers_train_step(net, opt, use_clip_grad=True, max_grad_norm=1.0, scale_sense=scale)
        mf_monitor = MFLossMonitor(per_print_times=1, origin_epochs=1, dataset_size=steps, global_batch_size=BATCH)
        # Its FLOPs collection (flops_collection on the compiled phase) drops the CPU run to PyNative
        # speed (~10x slower per step, measured); the FLOPs field is Ascend-only anyway.
        mf_monitor.mf_support = False
        callbacks.append(mf_monitor)
    else:
        train = LossScaleTrainStep(net, opt, scale_sense=scale)
    try:
        Model(train).train(1, make_dataset(source), callbacks=callbacks, dataset_sink_mode=False)
    finally:
        monitor.close()
    last = monitor.last_record
    return {
        "steps": last.step if last else 0,
        "trainer_steps": monitor.trainer_step,
        "anomalies": [e.to_dict() for e in monitor.kept.events],
        "rollbacks": monitor.rollbacks,
        "final_loss": last.loss if last else None,
        "final_mfu": last.mfu if last else None,
        "metrics_url": monitor.metrics_url,
        "stop_reason": monitor.stop_reason,
        "step_cell": type(train).__name__,
        "event_log": monitor.event_log.path,
        "mindformers_log": str(out / "mindformers_log" / "rank_0" / "info.log") if use_mindformers else None,
    }
