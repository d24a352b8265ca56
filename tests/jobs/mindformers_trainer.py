"""Train through MindFormers' Trainer from a YAML, launched the way ``run_mindformer.py --register_path DIR``
launches (that script is in MindFormers' repository, not in the 1.9 wheel; its route is reproduced here, not
copied): DIR is exported as ``REGISTER_PATH`` and appended to ``sys.path``, the YAML is read with
``MindFormerConfig``, ``build_context`` sets the context, and ``Trainer(config).train()`` runs.

``--nan-at N`` adds the test's fault: at the start of trainer step N one weight of the model is filled with
NaN (as a hardware fault would corrupt it), so that step's loss and gradients are NaN. ``--blowup-at N``: every
weight is multiplied by 30 at the start of step N (its loss spikes). ``--kill-at N``: the process is killed
(SIGKILL) at the end of step N. ``--resume``: MindFormers resumes from the newest checkpoint of its output folder
(``load_checkpoint: OUTPUT/checkpoint``, ``resume_training: True``, as ``run_mindformer.py``'s options set them).
The steps are the process's own count (``cur_step_num``: 1 at a resumed process's first step).
"""
import argparse
import os
import signal
import sys

import numpy as np
from mindformers.core.context import build_context
from mindformers.tools.register import MindFormerConfig
from mindformers.trainer import Trainer
from mindformers.utils.file_utils import set_output_path
from mindspore import Tensor
from mindspore.train import Callback


class At(Callback):
    """Calls ``fault(cb_params)`` at the start of trainer step ``step`` (``end``: at its end)."""

    def __init__(self, step, fault, end=False):
        super().__init__()
        self.step, self.fault, self.at_end = step, fault, end  # (Callback.end is a method)

    def _at(self, run_context, end):
        cb = run_context.original_args()
        if end == self.at_end and cb.cur_step_num == self.step:
            self.fault(cb)

    def on_train_step_begin(self, run_context):
        self._at(run_context, False)

    def on_train_step_end(self, run_context):
        self._at(run_context, True)


def nan_weight(cb):
    param = next(p for p in cb.train_network.trainable_params() if "embedding" in p.name)
    param.set_data(Tensor(np.full(param.shape, np.nan, np.float32)))


def blow_up(cb):
    for param in cb.train_network.optimizer.parameters:
        param.set_data(param * 30)


def kill(cb):
    os.kill(os.getpid(), signal.SIGKILL)


parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
parser.add_argument("--register_path")
parser.add_argument("--nan-at", type=int)
parser.add_argument("--blowup-at", type=int)
parser.add_argument("--kill-at", type=int)
parser.add_argument("--resume", action="store_true")
args = parser.parse_args()
if args.register_path is not None:
    os.environ["REGISTER_PATH"] = args.register_path
    if args.register_path not in sys.path:
        sys.path.append(args.register_path)
config = MindFormerConfig(args.config)
if args.resume:
    config.load_checkpoint, config.resume_training = os.path.join(config.output_dir, "checkpoint"), True
set_output_path(config.output_dir)
build_context(config)
faults = [At(step, fault, fault is kill) for fault, step in ((nan_weight, args.nan_at), (blow_up, args.blowup_at),
                                                           (kill, args.kill_at)) if step]
Trainer(config, callbacks=faults or None).train()
