"""A tutorial-shaped run whose console log tests/test_user_scripts.py replays: TinyLM trained 100 steps with
LossMonitor and TrainingMonitor (checkpoint every 10 steps, healthy after 10), NaN batches at trainer steps 45 and
71 (two rollbacks). Run as ``python console.py OUT > out.log 2>&1``, buffering as a user's run does."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from mindspore.train import LossMonitor  # noqa: E402

from train_helpers import train  # noqa: E402
from training_monitor.callbacks import TrainingMonitor  # noqa: E402

if __name__ == "__main__":
    mon = TrainingMonitor(output_dir=sys.argv[1], metrics_port=None, checkpoint_every=10, healthy_after=10,
                          watchdog=False)
    train([LossMonitor(), mon], steps=100, poison={44, 70})
    print("rollbacks", [(r["at_step"], r["to_step"]) for r in mon.rollbacks])
