"""Host time each callback adds per training step, on the same real step outputs.

A tiny model is trained for 250 steps through MindFormers' ``MFTrainOneStepCell`` (CPU-safe overflow
check), keeping the real step outputs ``(loss, overflow, scaling_sens, learning_rate, global_norm)`` of
the last 200 steps (past the initial loss descent, so a healthy stream). Then, for many rounds, each
callback's ``on_train_step_begin`` + ``on_train_step_end`` is called on the run's ``run_context`` with
the step counter advanced and the next kept outputs in ``net_outputs``, and the wall time per call is
measured; the contenders take turns on every step, so machine noise hits them alike. Contenders:

* ``read outputs (asnumpy)``: the five outputs to Python with ``asnumpy()`` and nothing else, as
  MindSpore's and MindFormers' monitors read them: the floor any such monitor pays;
* ``read outputs (item)``: the same with ``Tensor.item()``, ~15x cheaper per scalar, which
  TrainingMonitor uses;
* ``LossMonitor``: MindSpore's (prints the loss each step);
* ``MFLossMonitor``: MindFormers' (logs its step line and progress line each step);
* ``TrainingMonitor``: this project's, with metrics, all default rules, the ledger and the event log;
* ``TrainingMonitor via LoopMonitor``: the same, driven as in a functional training loop
  (``loop.batches`` marks the step's begin, ``loop.step(loss, grad_norm=, overflow=, loss_scale=)`` its end).

Run: ``.venv/bin/python benchmarks/hot_path.py [--steps N] [--rounds R]``; prints a Markdown table.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


@contextlib.contextmanager
def silenced():
    """File descriptors 1 and 2 to /dev/null (the MindFormers logger holds the original stdout)."""
    sys.stdout.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved + [null]:
            os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000, help="calls per contender per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="hotpath-")
    os.environ.setdefault("LOG_MF_PATH", os.path.join(tmp, "mf_log"))
    os.environ.setdefault("LOCAL_DEFAULT_PATH", os.path.join(tmp, "mf_out"))
    import mindspore as ms
    from mindformers.core.callback import MFLossMonitor  # before set_context (its import resets the mode)
    from mindspore import nn
    from mindspore.train import Callback, LossMonitor, Model

    from training_monitor.callbacks import LoopMonitor, TrainingMonitor, mindformers_train_step
    from training_monitor.callbacks.outputs import read_step_outputs
    from training_monitor.callbacks.tinylm import ByteWindows, TinyLM, load_corpus, make_dataset

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    net = TinyLM(seq_len=16, hidden=32, layers=1, heads=2)
    opt = nn.AdamWeightDecay(net.trainable_params(), learning_rate=1e-3)
    train = mindformers_train_step(net, opt, use_clip_grad=True,
                                   scale_sense=nn.DynamicLossScaleUpdateCell(1024.0, 2, 1000))

    class Capture(Callback):
        outputs = []

        def on_train_step_end(self, run_context):
            self.ctx = run_context
            if run_context.original_args().cur_step_num > 50:
                self.outputs.append(run_context.original_args().net_outputs)

    cap = Capture()
    Model(train).train(1, make_dataset(ByteWindows(load_corpus(), 16, 4, 250)), callbacks=[cap],
                       dataset_sink_mode=False)
    ctx, outputs = cap.ctx, cap.outputs
    cb = ctx.original_args()
    cb.batch_num = 10 ** 9  # one long epoch, so the step counter can advance freely

    class ReadAsnumpy(Callback):
        """The outputs to Python as MindSpore's and MindFormers' monitors read them: asnumpy()."""

        def on_train_step_end(self, run_context):
            [None if x is None else x.asnumpy() for x in run_context.original_args().net_outputs]

    class ReadItem(Callback):
        """The outputs to Python the cheapest way found: Tensor.item() (what TrainingMonitor uses)."""

        def on_train_step_end(self, run_context):
            read_step_outputs(run_context.original_args().net_outputs)

    mf = MFLossMonitor(per_print_times=1, origin_epochs=1, dataset_size=10 ** 9, global_batch_size=4)
    mf.mf_support = False  # its FLOPs collection is a one-off on Ascend; on CPU it fails (see callbacks/demo.py)
    tm = TrainingMonitor(output_dir=tmp, metrics_port=None, tokens_per_step=64, n_params=1e6, peak_tflops=1.0)
    tm.on_train_begin(ctx)

    class Loop:
        """A functional loop's calls: the next batch through ``loop.batches``, then ``loop.step`` with the outputs."""

        def __init__(self):
            monitor = TrainingMonitor(output_dir=os.path.join(tmp, "loop"), metrics_port=None, tokens_per_step=64,
                                      n_params=1e6, peak_tflops=1.0)
            self.loop = LoopMonitor(monitor, net, opt).__enter__()
            self.batches = self.loop.batches(iter(int, 1))  # an endless epoch of empty batches

        def on_train_step_begin(self, run_context):
            next(self.batches)

        def on_train_step_end(self, run_context):
            loss, overflow, scale, _, norm = run_context.original_args().net_outputs
            self.loop.step(loss, grad_norm=norm, overflow=overflow, loss_scale=scale)

    contenders = {"read outputs (asnumpy)": ReadAsnumpy(), "read outputs (item)": ReadItem(),
                  "LossMonitor": LossMonitor(1), "MFLossMonitor": mf, "TrainingMonitor": tm,
                  "TrainingMonitor via LoopMonitor": Loop()}
    results = {name: [] for name in contenders}
    step = cb.cur_step_num
    clock = time.perf_counter
    with silenced():  # the monitors print/log each step; the cost of producing those lines is measured
        for _ in range(args.rounds):
            spent = dict.fromkeys(contenders, 0.0)
            for _ in range(args.steps):  # interleaved, so machine noise hits every contender alike
                step += 1
                cb.cur_step_num = step
                cb.net_outputs = outputs[step % len(outputs)]
                for name, c in contenders.items():
                    t0 = clock()
                    c.on_train_step_begin(ctx)
                    c.on_train_step_end(ctx)
                    spent[name] += clock() - t0
            for name in contenders:
                results[name].append(spent[name] / args.steps * 1e6)
    med = {name: statistics.median(v) for name, v in results.items()}
    base, item, mfl = med["read outputs (asnumpy)"], med["read outputs (item)"], med["MFLossMonitor"]
    print(f"| callback | host µs per step (median of {args.rounds} rounds x {args.steps} steps) "
          f"| vs read (asnumpy) | vs read (item) | vs MFLossMonitor |")
    print("|---|---|---|---|---|")
    for name, v in med.items():
        print(f"| {name} | {v:.1f} | {v / base:.2f}x | {v / item:.2f}x | {v / mfl:.3f}x |")


if __name__ == "__main__":
    main()
