"""Host time each callback adds per training step, on the same real step outputs.

A tiny model is trained for a few steps through MindFormers' ``MFTrainOneStepCell`` (CPU-safe overflow
check) so that ``cb_params`` holds real step outputs ``(loss, overflow, scaling_sens, learning_rate,
global_norm)``. Then, for many rounds, each callback's ``on_train_step_begin`` + ``on_train_step_end``
is called on that same ``run_context`` with the step counter advanced, and the wall time per call is
measured. Contenders, measured in the same run:

* ``read outputs``: reading the five outputs to Python and nothing else (the floor any monitor pays);
* ``LossMonitor``: MindSpore's (prints the loss each step);
* ``MFLossMonitor``: MindFormers' (logs its step line and progress line each step);
* ``TrainingMonitor``: this project's, with metrics, all default rules, the ledger and the event log.

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
    from mindformers.core.callback import MFLossMonitor  # before set_context (its import resets the mode)
    import mindspore as ms
    from mindspore import nn
    from mindspore.train import Callback, LossMonitor, Model

    from callbacks import TrainingMonitor, mindformers_train_step
    from callbacks.outputs import read_step_outputs
    from callbacks.tinylm import ByteWindows, TinyLM, load_corpus, make_dataset

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    net = TinyLM(seq_len=16, hidden=32, layers=1, heads=2)
    opt = nn.AdamWeightDecay(net.trainable_params(), learning_rate=1e-3)
    train = mindformers_train_step(net, opt, use_clip_grad=True, scale_sense=nn.DynamicLossScaleUpdateCell(1024.0, 2, 1000))

    class Capture(Callback):
        def on_train_step_end(self, run_context):
            self.ctx = run_context

    cap = Capture()
    Model(train).train(1, make_dataset(ByteWindows(load_corpus(), 16, 4, 5)), callbacks=[cap], dataset_sink_mode=False)
    ctx = cap.ctx
    cb = ctx.original_args()
    cb.batch_num = 10 ** 9  # one long epoch, so the step counter can advance freely

    class ReadOnly(Callback):
        def on_train_step_end(self, run_context):
            read_step_outputs(run_context.original_args().net_outputs)

    mf = MFLossMonitor(per_print_times=1, origin_epochs=1, dataset_size=10 ** 9, global_batch_size=4)
    mf.mf_support = False  # its FLOPs collection is a one-off on Ascend; on CPU it fails (see callbacks/demo.py)
    tm = TrainingMonitor(output_dir=tmp, metrics_port=None, tokens_per_step=64, n_params=1e6, peak_tflops=1.0)
    tm.on_train_begin(ctx)
    contenders = {"read outputs": ReadOnly(), "LossMonitor": LossMonitor(1), "MFLossMonitor": mf,
                  "TrainingMonitor": tm}
    results = {name: [] for name in contenders}
    step = cb.cur_step_num
    with silenced():  # the monitors print/log each step; the cost of producing those lines is measured
        for _ in range(args.rounds):
            for name, c in contenders.items():
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    step += 1
                    cb.cur_step_num = step
                    c.on_train_step_begin(ctx)
                    c.on_train_step_end(ctx)
                results[name].append((time.perf_counter() - t0) / args.steps * 1e6)
    med = {name: statistics.median(v) for name, v in results.items()}
    base, mfl = med["read outputs"], med["MFLossMonitor"]
    print(f"| callback | host time per step (µs, median of {args.rounds} rounds x {args.steps} steps) "
          f"| vs read outputs | vs MFLossMonitor |")
    print("|---|---|---|---|")
    for name, v in med.items():
        print(f"| {name} | {v:.1f} | {v / base:.2f}x | {v / mfl:.2f}x |")


if __name__ == "__main__":
    main()
