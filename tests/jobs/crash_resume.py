"""A training process that crashes and one that resumes, run by tests/test_resume.py.

    crash_resume.py OUT hang STEP         train TinyLM monitored (checkpoint every 10 steps, healthy after 10);
                                          after trainer step STEP print "at STEP" and hang: the test kills -9
    crash_resume.py OUT first-hang        the same, but hang inside step 1 before the monitor sees it, with the
                                          stall rule's start-up allowance at 2 s: the test kills -9 after the stall
    crash_resume.py OUT resume CKPT STEP  load CKPT into the train cell, train 30 steps monitored with
                                          resume_from=CKPT; after trainer step STEP the LR is x30 for one update;
                                          writes OUT/resumed.json (resume, rollbacks, events, ledger)
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import mindspore as ms  # noqa: E402
from mindspore import Tensor  # noqa: E402

from train_helpers import AtStep, train  # noqa: E402
from training_monitor.callbacks import TrainingMonitor  # noqa: E402

SETTINGS = dict(run="resume-test", metrics_port=None, checkpoint_every=10, healthy_after=10)


def hang_at(step):
    def fn(cb):
        if cb.cur_step_num == step:
            print(f"at {step}", flush=True)
            time.sleep(600)
    return AtStep(fn)


def main():
    out, mode = sys.argv[1], sys.argv[2]
    if mode == "hang":
        train([TrainingMonitor(output_dir=out, **SETTINGS), hang_at(int(sys.argv[3]))], steps=60)
    elif mode == "first-hang":
        mon = TrainingMonitor(output_dir=out, rules={"stall": {"startup_seconds": 2.0}}, **SETTINGS)
        train([hang_at(1), mon], steps=60)
    elif mode == "resume":
        ckpt, surge_after = sys.argv[3], int(sys.argv[4])
        mon = TrainingMonitor(output_dir=out, resume_from=ckpt, **SETTINGS)

        def load_then_surge(cb):
            opt = cb.train_network.optimizer
            if cb.cur_step_num == surge_after:
                opt.learning_rate.set_data(Tensor(float(opt.learning_rate.asnumpy()) * 30, ms.float32))
            elif cb.cur_step_num == surge_after + 1:
                opt.learning_rate.set_data(Tensor(float(opt.learning_rate.asnumpy()) / 30, ms.float32))

        def cell(net, opt):
            step_cell = ms.nn.TrainOneStepCell(net, opt)
            ms.load_param_into_net(step_cell, ms.load_checkpoint(ckpt))  # what a resumed job does first
            return step_cell

        train([mon, AtStep(load_then_surge)], steps=30, cell=cell)
        summary = {"resumed": None if mon.resumed is None else
                   {"step": mon.resumed.entry.step, "records": mon.resumed.records,
                    "carried": [e.step for e in mon.resumed.carried]},
                   "instance": mon.instance, "rollbacks": mon.rollbacks,
                   "events": [e.to_dict() for e in mon.kept.events],
                   "ledger": [{"step": e.step, "path": e.path, "status": e.status, "reason": e.reason}
                              for e in mon.ledger.entries]}
        with open(os.path.join(out, "resumed.json"), "w") as f:
            json.dump(summary, f)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
