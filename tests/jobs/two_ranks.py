"""A job for ``msrun --worker_num=2 --local_worker_num=2``, run by tests/test_distributed.py.

    two_ranks.py OUT PORT train   data-parallel training of TinyLM, each rank serving /metrics on
                                  PORT + local rank and writing a file_sd target; then waits for OUT/release
    two_ranks.py OUT PORT hang    each rank trains alone; at step 8 rank 1 enters an AllReduce that rank 0
                                  never joins (rank 0 sleeps instead); the watchdog must report it
    two_ranks.py OUT PORT nan     data-parallel training where only rank 1's batch 44 holds a NaN; each
                                  rank writes OUT/summary_rank<r>.json (rollbacks, LR, final loss)
    two_ranks.py OUT PORT corrupt as ``nan``, and rank 1 truncates its step-30 checkpoint (the rollback's
                                  target) at step 44: rank 0's copy loads, rank 1's does not
    two_ranks.py OUT PORT die     data-parallel training printing MindSpore's LossMonitor lines; rank 1 is
                                  killed (SIGKILL) at step 12, and the cluster's scheduler times the ranks out
    two_ranks.py OUT PORT slowdata  as ``train``, with rank 1's loader taking 0.2 s to make each batch
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import mindspore as ms  # noqa: E402
from mindspore import Tensor, nn, ops  # noqa: E402
from mindspore.communication import get_rank, init  # noqa: E402
from mindspore.train import Callback, LossMonitor, Model  # noqa: E402

from train_helpers import BATCH, SEQ, tiny_net  # noqa: E402
from training_monitor.callbacks import TrainingMonitor  # noqa: E402
from training_monitor.callbacks.tinylm import ByteWindows, load_corpus, make_dataset  # noqa: E402


def blocking_collective_rank1():
    """Rank 1 waits in a collective its peer never joins."""
    return ops.AllReduce()(Tensor([1.0]))


class SlowWindows(ByteWindows):
    """A loader that takes 0.2 s to make each batch (a slow file system, too few workers)."""

    def __getitem__(self, i):
        time.sleep(0.2)
        return super().__getitem__(i)


class Truncate(Callback):
    """At step 44, truncate this rank's checkpoint of step 30 in ``monitor``'s ledger."""

    def __init__(self, monitor):
        super().__init__()
        self.monitor = monitor

    def on_train_step_end(self, run_context):
        if run_context.original_args().cur_step_num == 44:
            path = next(e.path for e in self.monitor.ledger.entries if e.step == 30)
            with open(path, "r+b") as f:
                f.truncate(100)


class Die(Callback):
    """At step 12, kill this process as the kernel's OOM killer would."""

    def on_train_step_end(self, run_context):
        if run_context.original_args().cur_step_num == 12:
            os.kill(os.getpid(), signal.SIGKILL)


class Hang(Callback):
    def __init__(self, rank):
        super().__init__()
        self.rank = rank

    def on_train_step_end(self, run_context):
        if run_context.original_args().cur_step_num == 8:
            if self.rank == 1:
                blocking_collective_rank1()
            else:
                time.sleep(40)


def main():
    out, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    init()
    rank = get_rank()
    if mode in ("train", "nan", "corrupt", "die", "slowdata"):
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    ms.set_seed(0)  # same initial weights on every rank, as data parallelism expects
    net = tiny_net()
    steps = {"train": 400, "hang": 20, "nan": 60, "corrupt": 60, "die": 40, "slowdata": 250}[mode]
    source = (SlowWindows if mode == "slowdata" and rank == 1 else ByteWindows)(load_corpus(), SEQ, BATCH, steps,
                                                                              seed=rank)
    if mode in ("nan", "corrupt") and rank == 1:
        source.poison = {44}
    opt = nn.SGD(net.trainable_params(), learning_rate=0.05)
    stall = {"min_seconds": 2.0, "startup_seconds": 60.0, "factor": 5.0, "startup_steps": 3}
    monitor = TrainingMonitor(run="msrun-test", output_dir=out, metrics_port=port,
                              file_sd_dir=os.path.join(out, "file_sd"), tokens_per_step=BATCH * SEQ * 2,
                              rules={"stall": stall}, checkpoint_every=10, healthy_after=10)
    callbacks = ([monitor] + ([Hang(rank)] if mode == "hang" else [])
                 + ([Truncate(monitor)] if mode == "corrupt" and rank == 1 else [])
                 + ([LossMonitor()] if mode == "die" else []) + ([Die()] if mode == "die" and rank == 1 else []))
    Model(nn.TrainOneStepCell(net, opt)).train(1, make_dataset(source), callbacks=callbacks,
                                               dataset_sink_mode=False)
    if mode in ("train", "slowdata"):  # keep /metrics up until the test has scraped
        release = os.path.join(out, "release")
        deadline = time.time() + 120
        while not os.path.exists(release) and time.time() < deadline:
            time.sleep(0.2)
    monitor.close()
    if mode in ("nan", "corrupt"):
        with open(os.path.join(out, f"summary_rank{rank}.json"), "w") as f:
            json.dump({"rollbacks": monitor.rollbacks, "lr": float(opt.learning_rate.asnumpy()),
                       "final_loss": monitor.last_record.loss, "final_step": monitor.last_record.step,
                       "events": [(e.rule, e.step) for e in monitor.kept.events]}, f)


if __name__ == "__main__":
    main()
