"""MindFormers integration: YAML-built callback, MFTrainOneStepCell outputs, the demo and its MF log."""
import json
import math
import subprocess
import sys

import pytest

from conftest import require

require("mindformers")  # installed by the README's set-up (extra "mindformers")

from mindformers.core.callback import build_callback  # noqa: E402

from train_helpers import loaded, train  # noqa: E402
from training_monitor import callbacks  # noqa: E402
from training_monitor.callbacks import TrainingMonitor, mindformers_train_step  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]


def test_yaml_entry_builds_the_monitor_and_mf_outputs_are_read(tmp_path):
    import yaml

    assert callbacks.register_mindformers()
    cfg = yaml.safe_load(f"""
callbacks:
  - type: TrainingMonitor
    run: yaml-run
    output_dir: {tmp_path}
    metrics_port: null
    checkpoint_every: 5
""")
    (mon,) = build_callback(cfg["callbacks"])
    assert isinstance(mon, TrainingMonitor) and mon.cfg.run == "yaml-run" and mon.cfg.checkpoint_every == 5
    seen = []
    from train_helpers import AtStep
    def cell(net, opt):
        return mindformers_train_step(net, opt, use_clip_grad=True, max_grad_norm=1.0, scale_sense=1024.0)

    train([mon, AtStep(lambda cb: seen.append(mon.last_record))], steps=12, cell=cell)
    rec = seen[-1]
    assert rec.step == 12 and math.isfinite(rec.loss)
    assert rec.grad_norm > 0 and rec.loss_scale == 1024.0 and rec.overflow is False
    assert rec.lr == pytest.approx(0.05)
    assert [e.step for e in mon.ledger.entries] == [5, 10]


def test_demo_detects_rolls_back_recovers_and_its_mindformers_log_replays(tmp_path):
    import threading
    import time

    # the ops path too: its Prometheus file_sd target while it runs (a CPU's peak given, so MFU is exported)
    sd, targets = tmp_path / "file_sd", {}
    proc = subprocess.Popen([sys.executable, "-m", "training_monitor.cli", "demo", "--steps", "200", "--inject",
                             "spike@100", "--inject", "nan@150", "--port", "0", "--output-dir", str(tmp_path), "--json",
                             "--file-sd-dir", str(sd), "--peak-tflops", "0.05"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)

    def watch():
        while proc.poll() is None:
            for f in sd.glob("*.json"):
                targets.setdefault(f.name, json.loads(f.read_text()))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    stdout, stderr = proc.communicate(timeout=600)
    watcher.join()
    assert proc.returncode == 0, stderr[-3000:]
    res = json.loads(stdout)
    ((name, (group,)),) = targets.items()
    assert name == "demo_rank0.json" and group["targets"] == [res["metrics_url"].split("//")[1].split("/")[0]]
    assert not list(sd.glob("*.json"))  # removed when the run ended
    assert 0 < res["final_mfu"] < 1
    assert res["step_cell"] == "MFTrainOneStepCellFinite"
    rules = {(a["rule"], a["step"]) for a in res["anomalies"]}
    assert ("loss_spike", 101) in rules  # the surged update is step 100's: the loss spikes at 101
    # the NaN batch's step overflows in the loss-scale cell, which skips its update: the weights did not change,
    # so the event alerts and asks for no rollback (skipped_run)
    (nan,) = [a for a in res["anomalies"] if a["rule"] == "nan_inf"]
    assert nan["actions"] == ["alert"] and "update was skipped (an overflow)" in nan["message"]
    (rb,) = res["rollbacks"]
    assert rb["lr_scale"] == 0.5 and rb["at_step"] == 101 and rb["to_step"] < 100
    assert math.isfinite(res["final_loss"]) and res["final_loss"] < 4.0
    assert res["metrics_url"].startswith("http://127.0.0.1:")

    # live = replay: the monitor's record log of the run (rollbacks included) gives the very same events
    rec = subprocess.run([sys.executable, "-m", "training_monitor.cli", "replay", "--json", str(tmp_path / "records_rank0.csv")],
                         capture_output=True, text=True, timeout=120)
    assert rec.returncode == 0, rec.stderr
    # (and the trainer's number of each step after the rollback, monitor step 194 being trainer step 220)
    key = lambda a: (a["rule"], a["step"], a["onset_step"], a["value"], a.get("trainer_step"))  # noqa: E731
    assert [key(a) for a in json.loads(rec.stdout)["anomalies"]] == \
        [key(a) for a in res["anomalies"] if a["source"] == "rule"]
    assert any(a.get("trainer_step") is not None for a in res["anomalies"])

    # MindFormers' own MFLossMonitor log of the same run, replayed offline, shows the same faults
    rep = subprocess.run([sys.executable, "-m", "training_monitor.cli", "replay", "--json", res["mindformers_log"]],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    replayed = json.loads(rep.stdout)
    assert replayed["format"] == "mindformers" and replayed["steps"] == res["trainer_steps"]
    got = {(a["rule"], a["step"]) for a in replayed["anomalies"]}
    assert ("loss_spike", 101) in got and any(rule == "nan_inf" for rule, _ in got)


def test_steps_follow_mf_loss_monitor_s_initial_step(tmp_path):
    # MindFormers' resume gives MFLossMonitor the resumed step (initial_step) and restarts cur_step_num at 1; its
    # lines print their sum: the monitor numbers its steps, the events' and the ledger's, the same way
    from mindformers.core.callback import MFLossMonitor
    monitor = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, rollback=False)
    mf = MFLossMonitor(learning_rate=0.05, origin_epochs=1, dataset_size=30, initial_step=400, global_batch_size=4)
    train([mf, monitor], steps=30, poison={20})
    nan = [e for e in monitor.kept.events if e.rule == "nan_inf"][0]
    assert (nan.step, nan.onset_step, nan.trainer_step) == (421, 421, None)
    assert [e.step for e in monitor.ledger.entries][:2] == [410, 420]


def test_a_resume_from_another_step_than_the_trainer_s_is_an_error(tmp_path, log_lines):
    # MindFormers resumed at the step its meta.json names (MFLossMonitor's initial_step); resume_from naming
    # another checkpoint restores detectors that are not those of the weights loaded: said, not hidden
    from mindformers.core.callback import MFLossMonitor
    settings = dict(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=5)
    first = TrainingMonitor(**settings)
    train([first], steps=30)
    assert first.ledger.wait(60)
    path = {e.step: e.path for e in first.ledger.entries}[20]
    for initial, wrong in ((30, True), (20, False)):
        log_lines.clear()
        mf = MFLossMonitor(learning_rate=0.05, origin_epochs=1, dataset_size=30, initial_step=initial,
                           global_batch_size=4)
        train([mf, TrainingMonitor(resume_from=path, **settings)], steps=2, cell=loaded(path))
        said = [line for line in log_lines if "the trainer resumed at step" in line]
        assert len(said) == wrong
        assert all(f"the trainer resumed at step {initial} but resume_from is the checkpoint of step 20" in line
                   for line in said)


def test_a_resume_after_a_rollback_is_checked_against_the_batches_the_checkpoint_was_saved_after(tmp_path, log_lines):
    # after a rollback the monitor's steps go back while the trainer's count of batches goes on: MindFormers resumes at
    # the batches its checkpoint was saved after (its meta.json's step), which the ledger holds beside the monitor's
    # step; resuming there is no error, resuming at the monitor's step is one (each from a run of its own: a resume
    # carries the run's ledger on)
    from mindformers.core.callback import MFLossMonitor
    for initial, wrong in ((38, False), (30, True)):
        settings = dict(output_dir=str(tmp_path / str(initial)), metrics_port=None, checkpoint_every=10,
                        healthy_after=5)
        first = TrainingMonitor(**settings)
        train([first], steps=50, poison={27})
        assert [(rb["at_step"], rb["to_step"]) for rb in first.rollbacks] == [(28, 20)]
        assert first.ledger.wait(60)
        entry = next(e for e in first.ledger.entries if e.step == 30)
        assert entry.batches_consumed == 38  # 28 batches, back to 20, 10 more
        log_lines.clear()
        mf = MFLossMonitor(learning_rate=0.05, origin_epochs=1, dataset_size=50, initial_step=initial,
                           global_batch_size=4)
        train([mf, TrainingMonitor(resume_from=entry.path, **settings)], steps=2, cell=loaded(entry.path))
        said = [line for line in log_lines if "the trainer resumed at step" in line]
        assert len(said) == wrong
        assert all("the trainer resumed at step 30 but resume_from is the checkpoint of step 38 (the monitor's step "
                   "30, after a rollback)" in line for line in said)


def test_scaled_learning_rate_from_a_mindformers_yaml_lr_config():
    import mindspore as ms
    import yaml
    from mindformers.core.lr import build_lr
    from mindspore import Tensor

    from training_monitor.callbacks import ScaledLearningRate

    assert callbacks.register_mindformers()
    cfg = yaml.safe_load("""
lr_schedule:
  type: ScaledLearningRate
  schedule:
    type: CosineWithWarmUpLR
    learning_rate: 0.001
    warmup_steps: 10
""")
    cfg["lr_schedule"]["total_steps"] = 100  # what MindFormers' Trainer writes into the top-level lr_schedule
    lr = build_lr(cfg["lr_schedule"])
    assert isinstance(lr, ScaledLearningRate) and type(lr.schedule).__name__ == "CosineWithWarmUpLR"
    step = Tensor(50, ms.int32)
    base = float(lr.schedule(step).asnumpy())
    reference = build_lr({"type": "CosineWithWarmUpLR", "learning_rate": 0.001, "warmup_steps": 10, "total_steps": 100})
    assert base == pytest.approx(float(reference(step).asnumpy()))
    assert float(lr(step).asnumpy()) == pytest.approx(base)
    ms.ops.assign(lr.scale, Tensor(0.5, ms.float32))
    assert float(lr(step).asnumpy()) == pytest.approx(0.5 * base)


def test_a_demo_that_stops_says_why_in_its_summary(tmp_path):
    """NaN batches at steps 20-22 (each step's update skipped by the loss-scale cell: the third in a row asks for
    the rollback, skipped_run) come before any checkpoint is healthy: the rollback fails and the run stops; the
    summary on stdout says so, beside the exit status."""
    out = subprocess.run([sys.executable, "-m", "training_monitor.cli", "demo", "--steps", "30", "--inject", "nan@20",
                          "--inject", "nan@21", "--inject", "nan@22", "--port", "0", "--output-dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-3000:]
    assert "  stopped  rollback failed at step 22: no loadable healthy checkpoint before step 20" in out.stdout
