"""Training scripts in the shape of MindSpore's tutorials (LossMonitor, ModelCheckpoint with retention), with
TrainingMonitor among their callbacks: NaN recovery, failed recoveries, strict mode, what the metrics say."""
import json
import os
import re
import socket
import subprocess
import sys
import time

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import CheckpointConfig, LossMonitor, Model, ModelCheckpoint

from train_helpers import BATCH, CORPUS, SEQ, AtStep, Served, tiny_net, train
from training_monitor.callbacks import MonitorFailure, ScaledLearningRate, TrainingMonitor
from training_monitor.callbacks.tinylm import make_dataset
from training_monitor.replay import replay_file

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def events(path):
    return [json.loads(line) for line in open(path / "events_rank0.jsonl")]


def saver(tmp_path, every=10, keep=10):
    return ModelCheckpoint("net", str(tmp_path / "mc"), CheckpointConfig(save_checkpoint_steps=every,
                                                                       keep_checkpoint_max=keep))


@pytest.mark.parametrize("monitor_first", [False, True])
def test_loss_monitor_in_either_order_and_a_nan_recovers(tmp_path, capsys, monitor_first):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, healthy_after=10)
    loss_monitor = LossMonitor()
    order = [mon, loss_monitor] if monitor_first else [loss_monitor, mon]
    # batch 44 holds a NaN: step 45's loss is NaN, which LossMonitor alone answers with ValueError
    train(order + [saver(tmp_path)], steps=60, poison={44})
    (rb,) = mon.rollbacks
    assert (rb["at_step"], rb["to_step"]) == (45, 30) and rb["checkpoint"].endswith("net-1_30.ckpt")
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch:")]
    steps = [int(line.split("step: ")[1].split(",")[0]) for line in printed]
    assert steps == [s for s in range(1, 61) if s != 45]  # every step printed but the one rolled back
    assert all("nan" not in line for line in printed)
    assert "on_train_step_end" not in vars(loss_monitor)  # the user's callback is left as it was
    broken = AtStep(lambda cb: 1 / 0 if cb.cur_step_num == 3 else None)
    with pytest.raises(ZeroDivisionError):  # also when training raised
        train([loss_monitor, TrainingMonitor(output_dir=str(tmp_path), metrics_port=None), broken], steps=5)
    assert "on_train_step_end" not in vars(loss_monitor)
    with pytest.raises(ValueError, match="loss is NAN or INF"):  # and, without the monitor, checks again
        train([loss_monitor], steps=10, poison={4})


def test_loss_monitor_and_a_failed_rollback_stop_with_the_monitor_s_reason(tmp_path, log_lines):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None)  # and no checkpoint at all
    with pytest.raises(SystemExit, match="rollback failed at step 5: no loadable healthy checkpoint") as stop:
        train([LossMonitor(), mon], steps=20, poison={4})
    assert stop.value.code != 0 and mon.trainer_step == 5
    assert any("rollback is on but cannot be done: no checkpoint is saved" in line for line in log_lines)
    (stopped,) = [e for e in events(tmp_path) if e.get("action") == "stop"]
    assert stopped["reason"] == mon.stop_reason


def test_retention_deletes_old_checkpoints_and_a_later_nan_lands_on_a_kept_healthy_one(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, healthy_after=10)
    seen = {}

    def after_rollback(cb):
        if mon.rollbacks and "weights" not in seen:
            seen["weights"] = {p.name: p.asnumpy().copy() for p in cb.train_network.network.trainable_params()}
            seen["files"] = sorted(os.listdir(tmp_path / "mc"))
            seen["ckpt"] = ms.load_checkpoint(mon.rollbacks[0]["checkpoint"])  # the pin goes with a newer healthy one

    # ModelCheckpoint keeps only its 2 newest files; NaN at step 45
    train([mon, saver(tmp_path, every=5, keep=2), AtStep(after_rollback)], steps=60, poison={44})
    (rb,) = mon.rollbacks
    # 30 is the newest healthy checkpoint before 45 (35 and 40 are pending); retention deleted its file at 40
    assert rb["to_step"] == 30 and "net-1_30.ckpt" not in seen["files"]
    assert os.path.dirname(rb["checkpoint"]) == str(mon.ckpt_dir / "kept")  # read from the pinned link
    for name, value in seen["weights"].items():
        np.testing.assert_array_equal(value, seen["ckpt"][name].asnumpy(), err_msg=name)
    by_step = {}
    for e in mon.ledger.entries:
        by_step.setdefault(e.step, e)
    assert by_step[10].status == "deleted" and by_step[10].reason == "file deleted (checkpoint retention)"
    assert all(os.path.exists(e.path) for e in mon.ledger.entries if e.status in ("healthy", "pending"))
    # the suspect ones (35 and 40, saved before the NaN at 45) stay quarantined; the ledger says retention took
    # their files (no evidence is claimed that is gone)
    suspect = [e for e in mon.ledger.entries if e.status == "quarantined"]
    assert suspect and all(os.path.exists(e.path) or e.reason.endswith("; its file since deleted (checkpoint "
                                                                       "retention)") for e in suspect)
    assert any(not os.path.exists(e.path) for e in suspect)
    # pinned now: the newest healthy checkpoint and the pending ones (the run ended at trainer step 60, whose
    # file ModelCheckpoint saved at train end)
    pinned = [e for e in mon.ledger.entries if os.path.dirname(e.path) == str(mon.ckpt_dir / "kept")]
    assert sorted(os.listdir(mon.ckpt_dir / "kept")) == ["10-net-1_50.ckpt", "11-net-1_55.ckpt", "12-net-1_60.ckpt"]
    assert [(e.step, e.status) for e in pinned] == [(35, "healthy")]  # its original is gone, the link holds it


def test_no_loadable_checkpoint_stops_the_run(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, healthy_after=10)

    def corrupt_all(cb):
        if cb.cur_step_num == 44:
            for e in mon.ledger.entries:
                with open(e.path, "r+b") as f:
                    f.truncate(100)

    with pytest.raises(SystemExit, match="rollback failed at step 45: no loadable healthy checkpoint"):
        train([mon, saver(tmp_path), AtStep(corrupt_all), LossMonitor()], steps=60, poison={44})
    assert mon.trainer_step == 45 and not mon.rollbacks
    assert {e.status for e in mon.ledger.entries if e.step < 40} == {"quarantined"}


def test_the_monitor_s_own_checkpoints_deleted_by_hand_are_said_to_be(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=5)

    def delete_all(cb):
        if cb.cur_step_num == 44:
            for e in mon.ledger.entries:
                os.remove(e.path)

    with pytest.raises(SystemExit, match="rollback failed at step 45: no loadable healthy checkpoint"):
        train([mon, AtStep(delete_all)], steps=60, poison={44})
    assert {e.reason for e in mon.ledger.entries if e.step < 40} == {
        "file deleted (not by the monitor, which keeps its own)"}


SCRIPT = """
import sys
import mindspore as ms
from mindspore import nn
from mindspore.train import LossMonitor, Model
sys.path.insert(0, {tests!r})
from training_monitor.callbacks import TrainingMonitor
from training_monitor.callbacks.tinylm import TinyLM, make_dataset
from train_helpers import CORPUS, SEQ, BATCH, Served

ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
net = TinyLM(seq_len=SEQ, hidden=32, layers=1, heads=2)
source = Served(CORPUS, SEQ, BATCH, 40, 0)
source.poison = {{30}}
schedule = nn.PolynomialDecayLR(0.05, 0.01, 40, 1.0)  # a schedule not wrapped in ScaledLearningRate
opt = nn.SGD(net.trainable_params(), learning_rate=schedule)
mon = TrainingMonitor(output_dir={out!r}, metrics_port=None, checkpoint_every=5, healthy_after=5)
Model(nn.TrainOneStepCell(net, opt)).train(1, make_dataset(source), callbacks=[LossMonitor(), mon],
                                           dataset_sink_mode=False)
print("trained on to the end")
"""


def test_an_lr_that_cannot_be_scaled_stops_the_process_with_status_1(tmp_path):
    out = tmp_path / "out"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tests=os.path.join(ROOT, "tests"), out=str(out)))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "trained on to the end" not in run.stdout
    assert "rollback is on but cannot be done: cannot scale a PolynomialDecayLR" in run.stderr  # at start
    reason = "rollback failed at step 31: cannot scale a PolynomialDecayLR learning rate in place"
    assert f"training-monitor: stopped the run: {reason}" in run.stderr
    (stopped,) = [e for e in events(out) if e.get("action") == "stop"]
    assert stopped["reason"].startswith(reason)


def test_on_failed_rollback_continue_reports_and_trains_on(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, on_failed_rollback="continue")
    train([mon], steps=12, poison={4})
    assert mon.trainer_step == 12 and mon.stop_reason is None
    failed = [e for e in events(tmp_path) if e.get("action") == "rollback_failed"]
    # SGD wrote the NaN into the weights: every later step is NaN too, and each says it was not rolled back
    assert [e["at_step"] for e in failed] == list(range(5, 13))
    # the settings' defaults save no checkpoint: the reason says so (train begin's warning said it first)
    assert failed[0]["reason"] == ("no loadable healthy checkpoint before step 5 (no checkpoint is saved: "
                                   "checkpoint_every is 0 and there is no ModelCheckpoint callback)")


def test_strict_raises_a_taken_metrics_port_and_an_unwritable_output_dir(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=busy.getsockname()[1], strict=True,
                              checkpoint_every=5)
        with pytest.raises(MonitorFailure, match="metrics endpoint .* not started"):
            train([mon], steps=3)
    (tmp_path / "file").write_text("")
    with pytest.raises(MonitorFailure, match="cannot be opened"):
        TrainingMonitor(output_dir=str(tmp_path / "file" / "out"), metrics_port=None, strict=True)
    with pytest.raises(MonitorFailure, match="rollback is on but cannot be done"):
        train([TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, strict=True)], steps=3)
    # an anomaly, its rollback, and a checkpoint that fails to load are news, not monitor failures
    mon = TrainingMonitor(output_dir=str(tmp_path / "ok"), metrics_port=None, strict=True, checkpoint_every=5,
                          healthy_after=3)

    def corrupt(cb):  # the newest healthy checkpoint (step 10) before the NaN at 15
        if cb.cur_step_num == 14:
            os.truncate(mon.ledger.entries[1].path, 100)

    train([mon, AtStep(corrupt)], steps=20, poison={14})
    assert [rb["to_step"] for rb in mon.rollbacks] == [5]
    assert mon.ledger.entries[1].reason.startswith("failed to load")


def test_data_wait_leaves_out_later_callbacks_and_a_fixed_lr_is_reported(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=5)
    records = []
    slow = AtStep(lambda cb: (time.sleep(0.05), records.append(mon.last_record)))
    train([mon, slow], steps=30, poison={24})
    waits = sorted(r.data_wait_s for r in records[1:])
    assert waits[len(waits) // 2] < 0.02, waits  # the 50 ms the callback after the monitor sleeps are not data wait
    assert records[0].tokens == BATCH * SEQ
    assert records[10].lr == pytest.approx(0.05)  # the optimizer's fixed LR, as plain TrainOneStepCell gives none
    (rb,) = mon.rollbacks
    assert rb["lr_multiplier"] == 0.5  # a multiplier, not the new LR
    assert records[-1].lr == pytest.approx(0.025)


def test_a_mistaken_keyword_setting_names_where_it_came_from():
    """A MindFormers callbacks entry's keys reach the monitor as keyword arguments, without their file: the
    error names them so (a new user looked for `settings:` in their YAML)."""
    from training_monitor.schema import ConfigError

    with pytest.raises(ConfigError, match=r"^TrainingMonitor arguments \(or a MindFormers callbacks entry's keys\): "
                                          r"healthy_aftr: unknown monitor setting \(did you mean 'healthy_after'\?"):
        TrainingMonitor(healthy_aftr=10, metrics_port=None)
    with pytest.raises(ConfigError, match=r"^tinylm: no such settings file \(the first argument is a settings file; "
                                          r"name the run with run='tinylm'\)"):
        TrainingMonitor("tinylm")  # (the run's name given where the settings file goes)


def test_scaled_learning_rate_refuses_settings_it_cannot_forward():
    with pytest.raises(TypeError, match="total_steps cannot be given to a schedule that is already built"):
        ScaledLearningRate(nn.PolynomialDecayLR(0.05, 0.01, 40, 1.0), total_steps=100)


class Classifier(nn.Cell):
    """The quick start's shape: Dense, ReLU, Dense over 16 features, 4 classes."""

    def __init__(self):
        super().__init__()
        self.seq = nn.SequentialCell(nn.Dense(16, 32), nn.ReLU(), nn.Dense(32, 4))

    def construct(self, x):
        return self.seq(x)


def test_weights_gone_nan_under_a_finite_loss_are_caught_before_a_checkpoint_turns_healthy(tmp_path):
    """A batch with one NaN feature: ReLU turns the NaN activations into 0, so the loss stays finite (the model
    now predicts a constant), but the update wrote NaN into the first layer's weights. No rule sees it in the
    loss; a checkpoint saved after it must not become a rollback target: the weights are checked before each
    promotion, and the run rolls back to the last checkpoint checked finite."""
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80 * 8, 16)).astype(np.float32)
    y = (x[:, :4].argmax(axis=1)).astype(np.int32)
    x[32 * 8 + 3, 5] = np.nan  # batch 33 (step 33)
    data = ms.dataset.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(8)
    net = Classifier()
    model = ms.train.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                           nn.SGD(net.trainable_params(), learning_rate=0.1))
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=5,
                          watchdog=False)
    model.train(1, data, callbacks=[LossMonitor(), mon], dataset_sink_mode=False)
    nan = [e for e in mon.kept.events if e.rule == "nan_inf"]
    # checkpoints every 10 steps, healthy after 5: the weights were checked finite at 15 and 25 (promoting 10 and
    # 20); step 33 wrote NaN; at 35, before promoting 30, they are not finite: onset after the last check
    assert [(e.step, e.onset_step) for e in nan] == [(35, 26)] and "weights not finite" in nan[0].message
    (rb,) = mon.rollbacks
    assert (rb["at_step"], rb["to_step"]) == (35, 20)  # 30 was saved after 25, the last check: quarantined
    healthy = [e for e in mon.ledger.entries if e.status == "healthy"]
    assert healthy and all(np.isfinite(ms.load_checkpoint(e.path)["seq.0.weight"].asnumpy()).all() for e in healthy)
    assert all(np.isfinite(p.asnumpy()).all() for p in net.trainable_params())  # trained on from step 20's state
    # the output folder replays from its record log, with the weights check's event from the event log beside it
    from training_monitor.replay import replay_paths
    from training_monitor.replay.runner import ReplayOptions

    (res,) = replay_paths([str(tmp_path)], options=ReplayOptions(checkpoint_every=10, healthy_after=5))
    replayed = [(e.rule, e.step, e.onset_step, e.source) for e in res.events if e.rule == "nan_inf"]
    assert replayed == [("nan_inf", 35, 26, "monitor")]
    assert [(b["at_step"], b["to_step"]) for b in res.would_be_rollbacks()] == [(35, 20)]


def test_a_console_log_replays_its_rollbacks_at_the_trainer_s_steps(tmp_path):
    """`python train.py > out.log 2>&1` of a run that rolled back twice: LossMonitor prints the trainer's steps,
    which count on after a rollback (45, then 71 for monitor step 56); the monitor's own event line names the
    trainer's step too, so the replayed console log has each fault once, where the log shows it."""

    log = tmp_path / "out.log"
    with open(log, "w") as out:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "jobs", "console.py"), str(tmp_path / "out")],
                       stdout=out, stderr=subprocess.STDOUT, timeout=300, check=True, cwd=ROOT)
    text = log.read_text()
    assert "rollbacks [(45, 30), (56, 40)]" in text
    assert text.count("rolled back from step") == 2  # news, never left out as a repeat (log.Repeats)
    assert "rank 0 nan_inf at step 56 (onset 56; trainer step 71)" in text
    logged = [json.loads(line) for line in (tmp_path / "out" / "events_rank0.jsonl").read_text().splitlines()]
    assert [(e["step"], e["trainer_step"]) for e in logged if e.get("rule") == "nan_inf"] == [(45, None), (56, 71)]
    res = replay_file(str(log))
    assert [(e.rule, e.step, e.onset_step, e.source) for e in res.events] == [("nan_inf", 45, 45, "monitor"),
                                                                                ("nan_inf", 71, 71, "monitor")]
    # (its message counts the monitor's steps: said so where they differ from the trainer's)
    assert [e.message for e in res.events] == ["monitor: loss is nan at step 45",
                                               "monitor (its step 56): loss is nan at step 56"]
    # LossMonitor's lines are its steps; the monitor's line at the end (`training ended at step 69 (trainer step
    # 100): 2 event(s) (nan_inf x2), ..`) is a summary, no step 69 with a loss of 2
    assert re.search(r"rank 0: training ended at step \d+ \(trainer step 100\): 2 event\(s\) \(nan_inf x2\)", text)
    assert res.steps == len(re.findall(r"^epoch: \d+ step: \d+, loss is ", text, re.MULTILINE))
    assert res.skipped["summary or evaluation line"] == 1



CRASHING = """
import sys
from mindspore.train import LossMonitor
sys.path.insert(0, {tests!r})
from train_helpers import AtStep, train
from training_monitor.callbacks import TrainingMonitor

def bug(cb):
    if cb.cur_step_num == 12:
        raise RuntimeError("For 'Gather', the 'input_indices' should be in the range [0, 128), but got 1000000")

monitor = [TrainingMonitor(output_dir={out!r}, metrics_port=None)] if {monitored!r} else []
train([LossMonitor(), *monitor, AtStep(bug)], steps=30)
"""


@pytest.mark.parametrize("monitored", [False, True])
def test_the_console_log_of_a_run_that_raised_replays_to_the_crash_after_its_last_step(tmp_path, monitored):
    # `python train.py > out.log 2>&1` of a run that raised at step 12: the log ends in Python's traceback; the
    # replay reports the crash the live monitor reports (its own event line there, once), or, for a run it did not
    # watch, the traceback's exception
    script, log = tmp_path / "train.py", tmp_path / "out.log"
    script.write_text(CRASHING.format(tests=os.path.join(ROOT, "tests"), out=str(tmp_path / "out"),
                                      monitored=monitored))
    with open(log, "w") as out:
        run = subprocess.run([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT, timeout=300,
                             cwd=ROOT)
    assert run.returncode == 1 and log.read_text().rstrip().endswith("but got 1000000")
    (crash,) = replay_file(str(log)).events
    assert (crash.rule, crash.step, crash.source) == ("trainer_crash", 12, "monitor" if monitored else "trainer")
    assert "RuntimeError" in crash.message and "'Gather'" in crash.message

STALLING = """
import sys, time
from mindspore.train import LossMonitor
sys.path.insert(0, {tests!r})
from train_helpers import AtStep, train
from training_monitor.callbacks import TrainingMonitor

def hang(cb):
    if cb.cur_step_num == 25:
        time.sleep(60)  # a collective that never returns

rules = {{"stall": {{"min_seconds": 2, "factor": 1.0, "actions": ["alert", "stop"]}}}}
train([TrainingMonitor(output_dir={out!r}, metrics_port=None, rules=rules), LossMonitor(), AtStep(hang)], steps=40)
"""


def test_the_stall_rule_s_stop_exits_with_status_3_after_writing_out_the_steps_before_the_stall(tmp_path):
    # the watchdog thread ends the process (os._exit, the main thread being stuck): the record log's buffered rows,
    # the steps just before the hang, are written out first, and the stall is in the event log
    script, out = tmp_path / "train.py", tmp_path / "out"
    script.write_text(STALLING.format(tests=os.path.join(ROOT, "tests"), out=str(out)))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 3, run.stderr[-3000:]
    steps = [int(line.split(",")[0]) for line in (out / "records_rank0.csv").read_text().splitlines()[1:]]
    assert steps == list(range(1, 26))
    assert [(e["rule"], e["step"], e["source"]) for e in events(out) if "rule" in e] == [("stall", 25, "watchdog")]


def test_model_train_called_for_each_epoch_with_an_evaluation_between_is_one_run(tmp_path, capsys):
    # a tutorial's epoch loop: `for epoch in range(n): model.train(1, ds, callbacks=..); evaluate(..)`, one monitor:
    # the trainer counts each call's steps from 1 again; the monitor numbers them on, writes every call's records
    # and events, and a NaN in the second call rolls back to that call's checkpoint; the printed log, each call's
    # `epoch: 1 step: 1..` after the evaluation's line, replays as one run too
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(0)
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=3)
    net = tiny_net()
    source = Served(CORPUS, SEQ, BATCH, 30, 0)
    model = Model(nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.05)))
    for epoch in range(2):
        source.poison = {24} if epoch == 1 else set()  # the second call's step 25: the run's step 55
        model.train(1, make_dataset(source), callbacks=[mon, LossMonitor()], dataset_sink_mode=False)
        losses = [float(net(*(ms.Tensor(a) for a in source[i])).asnumpy()) for i in range(3)]  # evaluate
        assert all(np.isfinite(losses))
        print(f"Test: \n Avg loss: {np.mean(losses):>8f} \n")  # (the quick start's evaluation lines)
    mon.close()
    out = tmp_path / "out.log"
    out.write_text(capsys.readouterr().out)
    res = replay_file(str(out))  # step 55's NaN is not printed: LossMonitor prints the steps after it, 56..60
    assert (res.steps, res.last.step, res.events) == (59, 60, [])
    (rb,) = mon.rollbacks
    assert (rb["at_step"], rb["to_step"]) == (55, 50)
    assert rb["skipped_batches"] == [51, 55]  # positions in the data stream of both calls
    assert [(e.rule, e.step) for e in mon.kept.events] == [("nan_inf", 55)]
    steps = [int(line.split(",")[0]) for line in open(tmp_path / "records_rank0.csv").read().splitlines()[1:]]
    assert steps == [*range(1, 56), *range(51, 56)]
    assert [e.get("action") for e in events(tmp_path) if "action" in e] == ["rollback"]



PER_EPOCH = """
import sys
import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.train import LossMonitor, Model
sys.path.insert(0, {tests!r})
from train_helpers import BATCH, CORPUS, SEQ, Served, tiny_net
from training_monitor.callbacks import TrainingMonitor
from training_monitor.callbacks.tinylm import make_dataset

ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
ms.set_seed(0)
mon = TrainingMonitor(output_dir={out!r}, metrics_port=None, checkpoint_every=10, healthy_after=3, watchdog=False)
net = tiny_net()
source = Served(CORPUS, SEQ, BATCH, 30, 0)
model = Model(nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.05)))
for epoch in range(3):
    source.poison = {{24}} if epoch == 1 else set()
    model.train(1, make_dataset(source), callbacks=[mon, LossMonitor()], dataset_sink_mode=False)
    losses = [float(net(*(ms.Tensor(a) for a in source[i])).asnumpy()) for i in range(3)]
    print(f"Test: \\n Avg loss: {{np.mean(losses):>8f}} \\n")
"""


def test_the_console_log_of_a_script_training_once_an_epoch_replays_to_the_live_events_at_their_steps(tmp_path):
    # `python train.py > out.log 2>&1` of a script calling Model.train(1, ..) three times: LossMonitor counts each
    # call's steps from 1, the monitor numbers them on (the NaN of the second call's step 25 is the run's step 55,
    # rolled back to 50) and names the trainer's step counted over the calls (56 for the monitor's 51 after it):
    # the replayed log has the live event once, where its lines are
    script, log, out = tmp_path / "train.py", tmp_path / "out.log", tmp_path / "out"
    script.write_text(PER_EPOCH.format(tests=os.path.join(ROOT, "tests"), out=str(out)))
    with open(log, "w") as f:
        run = subprocess.run([sys.executable, str(script)], stdout=f, stderr=subprocess.STDOUT, timeout=300, cwd=ROOT)
    assert run.returncode == 0, log.read_text()[-3000:]
    live = [(e["rule"], e["step"], e.get("trainer_step")) for e in events(out) if "rule" in e]
    assert live == [("nan_inf", 55, None)]
    res = replay_file(str(log))
    assert [(e.rule, e.step, e.source) for e in res.events] == [("nan_inf", 55, "monitor")]
    assert (res.steps, res.last.step) == (89, 90)  # step 55's line is not printed

def test_a_spike_rolled_back_keeps_its_loss_monitor_line_and_the_printed_log_replays_to_it(tmp_path, capsys):
    # LossMonitor raises only on a loss that is not finite: on a rolled-back step with a finite loss it prints its
    # line, so `python train.py > out.log` (stdout alone) replays to the spike the monitor rolled back
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=5)

    def surge(cb):  # step 41's update at LR 5 (100x): step 42's loss spikes
        lr = cb.train_network.optimizer.learning_rate
        if cb.cur_step_num in (40, 41):
            lr.set_data(ms.Tensor(5.0 if cb.cur_step_num == 40 else 0.05, ms.float32))

    train([mon, LossMonitor(), AtStep(surge)], steps=50)
    assert [(e.rule, e.step) for e in mon.kept.events] == [("loss_spike", 42)] and mon.rollbacks[0]["at_step"] == 42
    out = tmp_path / "out.log"
    out.write_text(capsys.readouterr().out)
    assert "epoch: 1 step: 42, loss is" in out.read_text()
    assert ("loss_spike", 42) in [(e.rule, e.step) for e in replay_file(str(out)).events]


def test_a_run_the_monitor_stopped_is_not_trained_on_unchecked_by_the_next_train_call(tmp_path, log_lines):
    # exit_on_stop off: the script's loop calls Model.train again after the monitor stopped the run (no
    # checkpoint to roll back to); the next call is stopped after its first step, and says why
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, exit_on_stop=False)
    net = tiny_net()
    source = Served(CORPUS, SEQ, BATCH, 20, 0)
    model = Model(nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.05)))
    source.poison = {4}
    model.train(1, make_dataset(source), callbacks=[mon], dataset_sink_mode=False)
    assert mon.stop_reason and mon.trainer_step == 5
    source.poison = set()
    model.train(1, make_dataset(source), callbacks=[mon], dataset_sink_mode=False)
    assert mon.trainer_step == 1
    assert any("this monitor stopped the run" in line and "stopped after its first step" in line for line in log_lines)


def test_a_noisy_toy_regression_is_not_stopped_by_a_start_up_excursion(tmp_path):
    # batches of 8 of a regression whose targets vary ~16: the third loss is 4.4x the two before it, the batches'
    # own noise (the run converges); in its warm-up the loss_spike event is alerted and asks for no rollback, which
    # would find no healthy checkpoint and stop the run (a new user's first try, trials 14 and 15)
    ms.set_seed(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 8, 16)).astype(np.float32)
    y = (x @ rng.normal(size=(16, 1)).astype(np.float32) + 0.1 * rng.normal(size=(200, 8, 1))).astype(np.float32)
    data = ds.GeneratorDataset(list(zip(x, y)), ["x", "y"], shuffle=False)
    net = nn.SequentialCell(nn.Dense(16, 32), nn.ReLU(), nn.Dense(32, 1))
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10)
    Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.002, 0.9)).train(
        1, data, callbacks=[mon, LossMonitor()], dataset_sink_mode=False)
    assert mon.stop_reason is None and mon.trainer_step == 200 and not mon.rollbacks
    early = [(e.rule, e.actions, e.severity) for e in mon.kept.events if e.step <= 10]
    assert early and all(actions == ["alert"] and severity == "warning" for _, actions, severity in early)  # no page
    assert all("at the run's start (its first 10 steps): no rollback" in e.message
               for e in mon.kept.events if e.step <= 10)


def test_a_model_checkpoint_reused_by_the_next_train_call_is_said_to_save_nothing_there(tmp_path, log_lines):
    # a tutorial's epoch loop with one ModelCheckpoint for all calls: MindSpore counts each call's steps from 1
    # and the callback compares them with its last save (step 30 of the first call), so the second call saves
    # nothing (no rollback target, no weights check): the monitor says so at the second call's start
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(0)
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, watchdog=False)
    saver = ModelCheckpoint("net", str(tmp_path / "ckpt"), CheckpointConfig(save_checkpoint_steps=10))
    net = tiny_net()
    source = Served(CORPUS, SEQ, BATCH, 30, 0)
    model = Model(nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.05)))
    for _ in range(2):
        model.train(1, make_dataset(source), callbacks=[mon, saver], dataset_sink_mode=False)
    mon.close()
    assert [e.step for e in mon.ledger.entries] == [10, 20, 30]  # nothing from the second call
    warned = [line for line in log_lines if "saved its last file at step 30 of an earlier Model.train call" in line]
    assert len(warned) == 1 and "before the call's step 40" in warned[0], warned
