"""A 2-rank job for ``msrun --worker_num=2 --local_worker_num=2`` that resumes, run by tests/test_resume.py.

    resume_ranks.py OUT first    data-parallel training of TinyLM for 40 steps; ModelCheckpoint saves every 10
                                 steps into OUT/ckpt/rank_<r>/ (after the monitor in the callback list)
    resume_ranks.py OUT resume   each rank loads its OUT/ckpt/rank_<r>/tiny-1_30.ckpt and trains 10 steps with
                                 resume_from=OUT/ckpt/rank_{rank}/tiny-1_30.ckpt; writes OUT/resumed_rank<r>.json
                                 (the checkpoints resumed from and carried, the last step, the healthy ones)
    resume_ranks.py OUT mismatch as ``resume``, but rank 1 loads (and names in resume_from) its step-20 file
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import mindspore as ms  # noqa: E402
from mindspore import nn  # noqa: E402
from mindspore.communication import get_rank, init  # noqa: E402
from mindspore.train import CheckpointConfig, Model, ModelCheckpoint  # noqa: E402

from train_helpers import BATCH, SEQ, tiny_net  # noqa: E402
from training_monitor.callbacks import TrainingMonitor  # noqa: E402
from training_monitor.callbacks.tinylm import ByteWindows, load_corpus, make_dataset  # noqa: E402


def main():
    out, mode = sys.argv[1], sys.argv[2]
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    init()
    rank = get_rank()
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    ms.set_seed(0)
    net = tiny_net()
    cell = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.05))
    pattern = os.path.join(out, "ckpt", "rank_{rank}", "tiny-1_20.ckpt" if mode == "mismatch" and rank == 1
                           else "tiny-1_30.ckpt")
    resume = pattern if mode in ("resume", "mismatch") else None
    if resume:
        ms.load_param_into_net(cell, ms.load_checkpoint(pattern.replace("{rank}", str(rank))))
    monitor = TrainingMonitor(run="msrun-resume", output_dir=out, metrics_port=None, healthy_after=5,
                              watchdog=False, resume_from=resume)
    saver = ModelCheckpoint("tiny", os.path.join(out, "ckpt", f"rank_{rank}"),
                            CheckpointConfig(save_checkpoint_steps=10, keep_checkpoint_max=10))
    steps = 40 if mode == "first" else 10
    source = ByteWindows(load_corpus(), SEQ, BATCH, steps, seed=rank)
    Model(cell).train(1, make_dataset(source), callbacks=[monitor] + ([saver] if mode == "first" else []),
                      dataset_sink_mode=False)
    monitor.close()
    if resume:
        with open(os.path.join(out, f"resumed_rank{rank}.json"), "w") as f:
            json.dump({"resumed": monitor.resumed and monitor.resumed.entry.step,
                       "carried": [e.step for e in monitor.resumed.carried] if monitor.resumed else [],
                       "last_step": monitor.last_record.step,
                       "healthy": [e.step for e in monitor.ledger.entries if e.status == "healthy"]}, f)


if __name__ == "__main__":
    main()
