"""Real MindSpore training on CPU with TrainingMonitor attached: rollback, LR, metrics, failures."""
import json
import math
import os
import socket
import subprocess
import time
import urllib.request

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
import pytest
from mindspore import Tensor, nn
from mindspore.train import CheckpointConfig, LearningRateScheduler, ModelCheckpoint
from prometheus_client.parser import text_string_to_metric_families

from train_helpers import BATCH, SEQ, AtStep, tiny_net, train
from training_monitor.callbacks import LossScaleTrainStep, ScaledLearningRate, TrainingMonitor
from training_monitor.replay import replay_file
from training_monitor.replay.runner import ReplayOptions, replay_paths

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]


def snapshot(net):
    return {p.name: p.asnumpy().copy() for p in net.trainable_params()}


def lr_used(seen, ckpt, source):
    """The LR plain SGD applied in the step after the rollback: it moved the weights by -lr * grad, with
    the gradient recomputed independently at the checkpoint's weights on the batch that step consumed."""
    probe_net = tiny_net()
    ms.load_param_into_net(probe_net, ckpt)
    ids, mask = source[seen["trainer_step"]]
    _, grads = ms.value_and_grad(probe_net, None, probe_net.trainable_params())(Tensor(ids), Tensor(mask))
    names = [p.name for p in probe_net.trainable_params()]
    g = np.concatenate([x.asnumpy().ravel() for x in grads])
    delta = np.concatenate([(seen["after_next"][n] - seen["after_load"][n]).ravel() for n in names])
    return -float(delta @ g) / float(g @ g)


def rollback_probe(mon, seen):
    """Snapshot the weights right after the rollback's load and after the next step."""
    def probe(cb):
        if mon.rollbacks and "after_load" not in seen:
            seen["after_load"] = snapshot(cb.train_network.network)
            seen["trainer_step"] = cb.cur_step_num
        elif "after_load" in seen and "after_next" not in seen:
            seen["after_next"] = snapshot(cb.train_network.network)
    return AtStep(probe)


def test_nan_rolls_back_to_healthy_checkpoint_with_halved_lr(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # output_dir relative to the working directory, as scripts name it
    mon = TrainingMonitor(output_dir="out", metrics_port=None, checkpoint_every=10, healthy_after=10)
    seen = {}
    # batch 44 carries a NaN: trainer step 45 computes a NaN loss and SGD writes NaN into every weight
    net, opt, source = train([mon, rollback_probe(mon, seen)], steps=60, poison={44})

    nan = [e for e in mon.kept.events if e.rule == "nan_inf"]
    assert [(e.step, e.onset_step) for e in nan] == [(45, 45)]
    # checkpoints at 10..40; 40 is still pending at 45 (healthy needs 10 clean steps) so 30 is the target
    (rb,) = mon.rollbacks
    assert (rb["at_step"], rb["to_step"], rb["lr_scale"]) == (45, 30, 0.5)
    assert rb["skipped_batches"] == [31, 45]  # batches 31..45 (the poisoned 45th among them) are not retrained
    ckpt = ms.load_checkpoint(rb["checkpoint"])
    for name, value in seen["after_load"].items():
        np.testing.assert_array_equal(value, ckpt[name].asnumpy(), err_msg=name)
    assert all(np.isfinite(v).all() for v in seen["after_load"].values())
    # ledger: 40 quarantined by the anomaly, 30 healthy; after the rollback step 40 is reached again and
    # saved under another name (the quarantined file is kept as evidence)
    assert all(e.path.startswith(str(tmp_path / "out") + "/") for e in mon.ledger.entries)  # (a restart elsewhere)
    entries = [(e.step, e.status, e.path.rsplit("/", 1)[1]) for e in mon.ledger.entries]
    assert entries[:4] == [(10, "healthy", "step_00000010.ckpt"), (20, "healthy", "step_00000020.ckpt"),
                           (30, "healthy", "step_00000030.ckpt"), (40, "quarantined", "step_00000040.ckpt")]
    assert entries[4][:1] == (40,) and entries[4][2] == "step_00000040_r1.ckpt"

    # the LR really used by the next update is the halved one
    assert float(opt.learning_rate.asnumpy()) == pytest.approx(0.025)
    assert lr_used(seen, ckpt, source) == pytest.approx(0.025, rel=0.02)

    # live = replay: the run's record log, replayed offline, gives the same events
    replayed = replay_file(str(tmp_path / "out" / "records_rank0.csv"))
    assert replayed.format == "csv" and replayed.steps == 60
    key = lambda e: (e.rule, e.step, e.onset_step, str(e.value))  # noqa: E731
    assert [key(e) for e in replayed.events] == [key(e) for e in mon.kept.events if e.source == "rule"]

    # the run went on to the end from step 30 and finished finite
    assert mon.last_record.step == 60 - (45 - 30) and math.isfinite(mon.last_record.loss)
    log = [json.loads(line) for line in (tmp_path / "out" / "events_rank0.jsonl").read_text().splitlines()]
    at = [i for i, e in enumerate(log) if e.get("rule") == "nan_inf"]
    assert len(at) == 1 and log[at[0] + 1]["action"] == "rollback"  # the event, then what was done about it


@pytest.mark.parametrize("lr", ["schedule cell", "list of per-step rates"])
def test_model_checkpoint_files_and_a_scaled_schedule(tmp_path, lr):
    """Checkpoints written by MindSpore's ModelCheckpoint are used; a ScaledLearningRate schedule is halved,
    whether a schedule cell or the list of per-step rates MindSpore's tutorials build
    (``nn.piecewise_constant_lr``, ``nn.cosine_decay_lr``), in a GRAPH-mode step cell."""
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, healthy_after=10)
    saver = ModelCheckpoint("tiny", str(tmp_path / "mc"), CheckpointConfig(save_checkpoint_steps=10,
                                                                        keep_checkpoint_max=10))
    seen = {}
    schedule = ScaledLearningRate(nn.PolynomialDecayLR(0.05, 0.05, 100, 1.0) if lr == "schedule cell"
                                  else nn.piecewise_constant_lr([100], [0.05]))
    def cell(net, opt):
        return nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=schedule))

    _, _, source = train([mon, saver, rollback_probe(mon, seen)], steps=60, poison={44}, cell=cell)
    assert [e.step for e in mon.ledger.entries][:4] == [10, 20, 30, 40]
    (rb,) = mon.rollbacks
    assert rb["to_step"] == 30 and rb["checkpoint"].endswith("tiny-1_30.ckpt")
    ckpt = ms.load_checkpoint(rb["checkpoint"])
    assert float(schedule.scale.asnumpy()) == 0.5
    assert lr_used(seen, ckpt, source) == pytest.approx(0.025, rel=0.02)


@pytest.mark.parametrize("scaled", [False, True])
def test_the_lr_of_a_per_step_table_is_recorded_and_an_overflowed_step_does_not_move_it(tmp_path, scaled):
    """MindSpore's tutorials give the optimizer the list ``nn.cosine_decay_lr(..)`` returns (the model zoo a 1-D
    tensor): its train-step cell does not output the LR, the monitor reads the step's value from the table at the
    optimizer's global step; a step whose update the loss scaler skipped (a NaN batch) leaves it where it was."""
    table = nn.cosine_decay_lr(0.001, 0.1, 40, 20, 2)
    lrs = {}
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, rollback=False)

    def cell(net, opt):
        opt = nn.Momentum(net.trainable_params(), ScaledLearningRate(table, scale=0.5) if scaled else table, 0.9)
        return LossScaleTrainStep(net, opt, scale_sense=ms.nn.DynamicLossScaleUpdateCell(1024.0, 2, 1000))

    train([mon, AtStep(lambda cb: lrs.__setitem__(cb.cur_step_num, mon.last_record.lr))], steps=30, poison={12},
          cell=cell)
    f = 0.5 if scaled else 1.0
    assert [lrs[s] for s in (1, 2, 12)] == pytest.approx([table[0] * f, table[1] * f, table[11] * f])
    assert lrs[13] == pytest.approx(table[11] * f)  # step 13 skipped its update: global step still 12
    assert lrs[30] == pytest.approx(table[28] * f) and table[28] != table[11]


def test_a_learning_rate_scheduler_keeps_a_rollback_s_lr_cut_and_the_lr_it_sets_is_recorded(tmp_path):
    """MindSpore's LearningRateScheduler listed after the monitor (a new user's script): it writes its function
    of the step into the optimizer's LR Parameter at every step end, which undid the rollback's cut, and the
    records kept the LR read at train begin."""
    def schedule(lr, step):  # a function of the step alone: it would write 0.05 x 0.9^k back after the cut
        return 0.05 * 0.9 ** (step // 10)

    from mindspore.train import Model

    from train_helpers import CORPUS, Served
    from training_monitor.callbacks.tinylm import make_dataset

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(0)
    net = tiny_net()
    source = Served(CORPUS, SEQ, BATCH, 60, 0)
    source.poison = {44}
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10)
    lrs = {}  # trainer step -> the optimizer's LR after every callback's step end (the next step's)
    probe = AtStep(lambda cb: lrs.__setitem__(cb.cur_step_num, float(cb.optimizer.learning_rate.asnumpy())))
    model = Model(net, optimizer=nn.SGD(net.trainable_params(), learning_rate=0.05))  # the tutorials' shape
    model.train(1, make_dataset(source), callbacks=[mon, LearningRateScheduler(schedule), probe],
                dataset_sink_mode=False)
    (rb,) = mon.rollbacks
    assert rb["at_step"] == 45
    assert lrs[44] == pytest.approx(schedule(None, 44)) and lrs[45] == pytest.approx(schedule(None, 45) * 0.5)
    assert lrs[59] == pytest.approx(schedule(None, 59) * 0.5)
    assert mon.last_record.lr == pytest.approx(lrs[59])  # the LR trainer step 60 ran with


def test_a_nan_in_the_lr_table_is_caught_at_its_step_and_a_rollback_that_cannot_cure_it_stops_the_run(tmp_path):
    """A per-step LR table with a NaN (a schedule dividing by zero at one step): the step's update writes NaN into
    the weights while its own loss is still finite. The monitor flags the LR at that step, before any NaN loss;
    the rollback's LR cut cannot cure a NaN rate, so the same step fails again and the budget stops the run."""
    table = nn.cosine_decay_lr(0.001, 0.05, 60, 60, 1)
    table[20] = float("nan")  # trainer step 21 runs with it
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=5, healthy_after=5,
                          max_rollbacks=1)

    def cell(net, opt):
        return nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=ScaledLearningRate(table)))

    with pytest.raises(SystemExit, match="rollback budget exhausted"):
        train([mon], steps=60, cell=cell)
    first = next(e for e in mon.kept.events if e.rule == "nan_inf")
    assert (first.step, first.onset_step) == (21, 21) and first.message.startswith("learning rate is nan at step 21")
    assert mon.rollbacks[0]["at_step"] == 21 and len(mon.rollbacks) == 1


def test_a_burst_of_bad_batches_costs_one_rollback_and_one_lr_cut(tmp_path, log_lines):
    # batches 44-46 carry a NaN (a corrupt shard): trainer step 45 rolls back to 30 with the LR halved; the data
    # iterator goes on, so steps 31 and 31 again run batches 45 and 46 on checkpoint 30's own weights: their
    # NaN is the batch's, undone with no more LR cut and no budget spent (max_rollbacks: 2 such batches in a
    # row), and the run trains on to its end
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10,
                          max_rollbacks=2)
    net, opt, source = train([mon], steps=60, poison={44, 45, 46})
    assert [(rb["at_step"], rb["to_step"], rb["lr_multiplier"], rb.get("batch", False)) for rb in mon.rollbacks] \
        == [(45, 30, 0.5, False), (31, 30, 0.5, True), (31, 30, 0.5, True)]
    assert mon.policy.done == 1 and float(opt.learning_rate.asnumpy()) == pytest.approx(0.025)
    assert mon.stop_reason is None and math.isfinite(mon.last_record.loss)
    assert mon.trainer_step == 60 and mon.last_record.step == 60 - (45 - 30) - 2
    assert sum("LR kept at x0.5 of the schedule: step 31 ran on that checkpoint's own weights, its batch is bad"
               in line for line in log_lines) == 2
    # live = replay: the record log replayed with the run's checkpoint settings gives the same decisions
    options = ReplayOptions(checkpoint_every=10, healthy_after=10, max_rollbacks=2)
    (replayed,) = replay_paths([str(tmp_path / "records_rank0.csv")], options=options)
    assert [(rb["at_step"], rb["to_step"], rb["lr_multiplier"], rb.get("batch", False))
            for rb in replayed.would_be_rollbacks()] == [(45, 30, 0.5, False), (31, 30, 0.5, True), (31, 30, 0.5, True)]
    # what the live monitor did, from the event log beside the record log, in the words of its own log lines
    (folder,) = replay_paths([str(tmp_path)], options=options)
    lines = [line for line in log_lines if "rolled back from step" in line]
    assert len(folder.actions) == len(lines) == 3
    assert all(action in line for action, line in zip(folder.actions, lines))
    assert folder.actions[0].startswith("rank 0: rolled back from step 45 to healthy checkpoint at step 30 (")


def test_rollback_budget_exhausted_stops_the_run_and_keeps_files(tmp_path, log_lines):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=5, healthy_after=5,
                          max_rollbacks=1)
    # two corrupted batches: the first costs the one allowed rollback, the second stops the run, and the
    # process would exit with status 1 and the reason
    with pytest.raises(SystemExit, match="rollback budget exhausted") as stop:
        train([mon], steps=60, poison={24, 34})
    assert stop.value.code != 0
    assert len(mon.rollbacks) == 1
    assert mon.stop_reason.startswith("rollback budget exhausted")
    assert mon.trainer_step == 35, "run should stop at the step of the second NaN"
    assert any("stopping the run: rollback budget exhausted" in line for line in log_lines)
    # the stop says where to resume from (a trainer's own save at the end of training is after the anomaly)
    assert any(line.rstrip().endswith(f"(resume from the last healthy checkpoint, step 15: {mon.ckpt_dir}/"
                                      "step_00000015.ckpt)") for line in log_lines if "stopping the run" in line)
    assert len(list(mon.ckpt_dir.iterdir())) == len(mon.ledger.entries)
    assert all(os.path.exists(e.path) for e in mon.ledger.entries)
    # the end of training says in one line what the monitoring came to
    (end,) = [line for line in log_lines if "training ended at step" in line]
    assert end.rstrip().endswith(f"rank 0: training ended at step 25 (trainer step 35): 2 event(s) (nan_inf x2), 1 "
                                 f"rollback(s); stopped: {mon.stop_reason}; event log {tmp_path}/events_rank0.jsonl")


def test_an_exception_that_ends_training_is_a_trainer_crash_at_the_last_step_with_its_traceback(tmp_path):
    # MindSpore raises out of Model.train (an out-of-vocabulary id in a Gather, a user's callback): the event
    # log names the step it died after and why, and the record log holds that step (written at the end); its
    # file_sd target stays, so Prometheus sees the exporter go down with the process
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=0, file_sd_dir=str(tmp_path / "sd"))

    def boom(cb):
        if cb.cur_step_num == 12:
            raise RuntimeError("For 'Gather', the 'input_indices' should be in the range [0, 128), but got 1000000")

    with pytest.raises(RuntimeError, match="Gather"):
        train([mon, AtStep(boom)], steps=30)
    (ev,) = mon.kept.events
    assert (ev.rule, ev.step, ev.source, ev.severity) == ("trainer_crash", 12, "monitor", "critical")
    assert ev.message == ("training raised RuntimeError after step 12: For 'Gather', the 'input_indices' should be "
                          "in the range [0, 128), but got 1000000")
    assert "Traceback (most recent call last)" in ev.details and "in boom" in ev.details
    logged = [json.loads(line) for line in (tmp_path / "events_rank0.jsonl").read_text().splitlines()]
    assert [(e["rule"], e["step"]) for e in logged] == [("trainer_crash", 12)]
    assert (tmp_path / "records_rank0.csv").read_text().splitlines()[-1].startswith("12,")
    assert len(list((tmp_path / "sd").glob("*.json"))) == 1
    mon.close()
    # the output folder replayed: its record log, the crash from the event log beside it
    from training_monitor.replay import replay_paths

    (res,) = replay_paths([str(tmp_path)])
    assert [(e.rule, e.step) for e in res.events] == [("trainer_crash", 12)]


def test_a_new_process_never_rolls_back_to_an_older_process_s_checkpoints(tmp_path, monkeypatch):
    import training_monitor.ledger as ledger
    hashed = ledger.file_checksum
    # a slow disk: the first monitor's last checksum is still being computed when its training returns
    monkeypatch.setattr(ledger, "file_checksum", lambda path: (time.sleep(0.5), hashed(path))[1])
    first = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10)
    train([first], steps=40)
    second = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10)
    assert second.ledger.entries == [] and second.ckpt_dir != first.ckpt_dir
    # the first monitor's ledger was complete when its training returned: nothing of it is written over the
    # second's afterwards (which a restart of the second would read)
    assert first.ledger.wait(30) and not (tmp_path / "ledger_rank0.json").exists()
    assert json.loads((tmp_path / f"ledger_rank0.before-{second.instance}.json").read_text())["checkpoints"][-1][
        "checksum"]
    # NaN at step 15 of the second run: the first run's healthy step-10 checkpoint must not be used, and
    # with no healthy checkpoint of its own the run stops instead of training on
    with pytest.raises(SystemExit, match=r"no loadable healthy checkpoint before step 15 \(the checkpoint of step 10 "
                                         r"was not healthy yet: it turns healthy after 10 clean steps, at step 20\)"):
        train([second], steps=20, poison={14})
    assert second.rollbacks == [] and any(e.rule == "nan_inf" for e in second.kept.events)
    assert (tmp_path / f"ledger_rank0.before-{second.instance}.json").exists()
    assert all(os.path.exists(e.path) for e in first.ledger.entries)


def test_a_second_live_run_on_the_same_output_dir_writes_a_folder_of_its_own(tmp_path, log_lines):
    """Two processes given one output_dir (a new user restarted a run whose first process was still alive):
    their record logs interleaved and the newcomer renamed the running one's ledger. The first to hold a
    rank's files keeps them; the other writes below, says so, and fails under strict."""
    import sys

    from training_monitor.callbacks import MonitorFailure

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from training_monitor.callbacks import TrainingMonitor; "
         f"TrainingMonitor(output_dir={str(tmp_path)!r}, metrics_port=None); print('ready', flush=True); "
         "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=5, healthy_after=5)
        assert mon.output_dir == tmp_path / f"rank0-{mon.instance}"
        assert any(f"rank 0's files there are in use by process {holder.pid}" in line for line in log_lines)
        train([mon], steps=10)
        assert mon.ledger.entries and (mon.output_dir / "records_rank0.csv").stat().st_size > 0
        assert len((tmp_path / "records_rank0.csv").read_text().splitlines()) == 1  # the holder's header alone
        with pytest.raises(MonitorFailure, match="in use by process"):
            TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, strict=True)
    finally:
        holder.stdin.close()
        holder.wait(60)
    assert TrainingMonitor(output_dir=str(tmp_path), metrics_port=None).output_dir == tmp_path  # released at exit


def test_a_second_training_monitor_in_the_callback_list_does_nothing_and_says_so(tmp_path, log_lines):
    """Two monitors in one list (made once in a helper and once inline) both rolled back at a NaN, so the LR was
    cut twice while each said x0.5, and their rows interleaved in one record log. The first in the list monitors
    the run; the other does nothing and says so (strict: raises)."""
    from training_monitor.callbacks import MonitorFailure

    kw = dict(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10)
    first, second = TrainingMonitor(**kw), TrainingMonitor(**kw)
    _, opt, _ = train([first, second], steps=60, poison={44})
    assert [(r["at_step"], r["to_step"]) for r in first.rollbacks] == [(45, 30)] and second.rollbacks == []
    assert float(opt.learning_rate.asnumpy()) == pytest.approx(0.025)  # cut once
    steps = [int(row.split(",")[0]) for row in (tmp_path / "records_rank0.csv").read_text().splitlines()[1:]]
    assert steps == [*range(1, 46), *range(31, 46)]  # one monitor's rows (back to 30 at 45, 15 steps after)
    assert second.last_record is None and second.kept.events == []
    assert any("two TrainingMonitor callbacks of rank 0 in one callback list" in line for line in log_lines)
    with pytest.raises(MonitorFailure, match="two TrainingMonitor callbacks of rank 0"):
        train([TrainingMonitor(**kw), TrainingMonitor(**kw, strict=True)], steps=2)


def test_corrupted_checkpoint_is_quarantined_and_an_older_one_used(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10)

    def corrupt(cb):
        if cb.cur_step_num == 44:  # truncate the newest healthy checkpoint (step 30) before the NaN at 45
            path = next(e.path for e in mon.ledger.entries if e.step == 30)
            with open(path, "r+b") as f:
                f.truncate(100)

    train([mon, AtStep(corrupt)], steps=50, poison={44})
    (rb,) = mon.rollbacks
    assert rb["to_step"] == 20
    bad = next(e for e in mon.ledger.entries if e.step == 30)
    assert bad.status == "quarantined" and bad.reason.startswith("failed to load")


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def test_metrics_scraped_over_http_during_a_real_run(tmp_path, promtool):
    # MFU with a declared model (6 N FLOPs per token, N = 1e6) on a declared 1 TFLOP/s device
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=0, run="t", tokens_per_step=BATCH * SEQ,
                          n_params=1e6, peak_tflops=1.0, world_size=1)
    texts = {}

    def grab(cb):
        if cb.cur_step_num == 20:
            texts["mid"] = scrape(mon.metrics_url)
            texts["record"] = mon.last_record

    def cell(net, opt):
        return LossScaleTrainStep(net, opt, scale_sense=ms.nn.DynamicLossScaleUpdateCell(1024.0, 2, 1000))

    t0 = time.time()
    train([mon, AtStep(grab)], steps=30, cell=cell)
    mon.close()
    fams = {f.name: f for f in text_string_to_metric_families(texts["mid"])}

    def value(name, suffix=""):
        (s,) = [s for s in fams[name].samples if s.name == name + suffix]
        assert s.labels["run"] == "t" and s.labels["rank"] == "0"
        return s.value

    assert value("train_step") == 20
    assert 0.5 < value("train_loss") < 8.0
    assert value("train_loss_scale") == 1024.0
    assert value("train_tokens", "_total") == 20 * BATCH * SEQ
    assert value("train_overflow_steps", "_total") == 0
    assert value("train_step_duration_seconds", "_count") == 20
    assert 0 < value("train_step_duration_seconds", "_sum") < 60
    tps = value("train_tokens_per_second")
    assert tps > 10 and value("train_tokens_per_second_per_device") == tps
    assert value("train_mfu_ratio") == pytest.approx(6e6 * tps / 1e12)
    assert 0 < value("train_data_wait_ratio") < 1
    assert t0 <= value("train_last_step_timestamp_seconds") <= time.time()
    assert 0 <= value("train_data_wait_seconds") < 5
    # TPS over the step's whole period: the tokens over its compute, its wait for data and the callbacks after the
    # monitor at the end of the step before; the wait's share of that period
    rec = texts["record"]
    period = rec.step_time_s + rec.data_wait_s + rec.callbacks_s
    assert tps == pytest.approx(BATCH * SEQ / period)
    assert value("train_data_wait_ratio") == pytest.approx(rec.data_wait_s / period)
    out = subprocess.run([promtool, "check", "metrics"], input=texts["mid"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_port_in_use_is_a_logged_error_and_a_free_port_is_served_and_announced(tmp_path, log_lines):
    # a second job on the node with the same metrics_port: its ranks serve a free port, which the file_sd target
    # names, instead of going unmonitored (a scrape of the taken port reads the other job's series)
    sd, seen = tmp_path / "file_sd", []
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=port, file_sd_dir=str(sd))
        train([mon, AtStep(lambda cb: cb.cur_step_num == 5 and seen.append(
            (json.loads((sd / "default_rank0.json").read_text()), scrape(mon.metrics_url))))], steps=10)
    assert mon.last_record.step == 10
    assert any(f"metrics endpoint 127.0.0.1:{port} not started (Address already in use); serving /metrics on a "
               "free port instead" in line for line in log_lines)
    served = int(mon.metrics_url.split(":")[2].split("/")[0])
    ((target, text),) = seen
    assert served != port and target[0]["targets"] == [f"127.0.0.1:{served}"] and "train_step" in text
    mon.close()


def test_monitor_failure_is_survived_unless_strict(tmp_path, log_lines):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None)
    mon.engine.observe = None  # a bug inside the monitor
    train([mon], steps=5)
    assert sum("training monitor failed" in line for line in log_lines) == 5
    strict = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, strict=True, checkpoint_every=10)
    strict.engine.observe = None
    with pytest.raises(TypeError):
        train([strict], steps=5)


def test_an_unwritable_output_dir_is_said_at_train_begin_and_named_by_the_failed_rollback(tmp_path, log_lines):
    """The output_dir is a path below a file: train begin said when the first rollback target turns healthy and
    the stop at a NaN blamed "no loadable healthy checkpoint" alone. Train begin now says the checkpoints
    cannot be written, and the stop says why none is there; training is not hurt until then."""
    (tmp_path / "afile").write_text("")
    mon = TrainingMonitor(output_dir=str(tmp_path / "afile" / "out"), metrics_port=None, checkpoint_every=10,
                          healthy_after=10, exit_on_stop=False)
    train([mon], steps=40, poison={34})
    assert any("rollback is on but cannot be done: the monitor's checkpoints cannot be written ([Errno 20] Not a "
               "directory" in line for line in log_lines)
    assert not any("the first rollback target turns healthy" in line for line in log_lines)
    assert mon.stop_reason.startswith("rollback failed at step 35: no loadable healthy checkpoint before step 35 "
                                      "(the monitor's checkpoint of step 30 was not written: [Errno 20] Not a "
                                      "directory")


def test_demo_output_dir_is_only_cleared_when_a_demo_made_it(tmp_path):
    from training_monitor.callbacks.demo import MARKER, _fresh_output_dir

    mine = tmp_path / "results"
    mine.mkdir()
    (mine / "thesis.txt").write_text("precious")
    with pytest.raises(ValueError, match="not made by 'monitor demo'"):
        _fresh_output_dir(mine)
    assert (mine / "thesis.txt").read_text() == "precious"
    demo = _fresh_output_dir(tmp_path / "demo")
    (demo / "events_rank0.jsonl").write_text("old run\n")
    assert _fresh_output_dir(demo) == demo and sorted(p.name for p in demo.iterdir()) == [MARKER]


def test_rank0_only_export_for_very_large_jobs(tmp_path):
    quiet = TrainingMonitor(output_dir=str(tmp_path), rank=1, metrics_port=0, export_ranks="rank0")
    loud = TrainingMonitor(output_dir=str(tmp_path), rank=0, metrics_port=0, export_ranks="rank0",
                           file_sd_dir=str(tmp_path / "sd"))
    train([quiet, loud], steps=5)
    assert quiet.metrics_url is None and quiet.last_record.step == 5
    assert loud.metrics_url is not None and "train_step" in scrape(loud.metrics_url)
    loud.close()
    assert not list((tmp_path / "sd").glob("*.json"))


def test_counted_real_tokens_instead_of_batch_times_sequence(tmp_path):
    counted = []

    def count(cb):  # real tokens: the loss-mask sum of the batch (all ones here, minus one masked token)
        n = int(cb.train_dataset_element[1].asnumpy().sum()) - 1
        counted.append(n)
        return n

    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=0, count_tokens=count)
    train([mon], steps=6)
    assert counted == [BATCH * SEQ - 1] * 6
    assert mon.metrics.tokens == 6 * (BATCH * SEQ - 1)
    mon.close()


def test_tps_spans_the_whole_step_period_with_the_callbacks_after_the_monitor(tmp_path):
    # a callback after the monitor that takes 50 ms a step (a checkpoint save, a print): the period between two
    # step ends holds it, so TPS is at most the step's tokens over 50 ms, and the record says where it went
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, tokens_per_step=BATCH * SEQ)
    records = []
    train([mon, AtStep(lambda cb: time.sleep(0.05)), AtStep(lambda cb: records.append(mon.last_record))], steps=6)
    mon.close()
    later = records[1:]  # the first step has no step before it
    assert all(r.callbacks_s >= 0.05 for r in later)
    assert all(r.tokens_per_second == pytest.approx(
        r.tokens / (r.step_time_s + (r.data_wait_s or 0.0) + r.callbacks_s)) for r in later)
    assert all(r.tokens_per_second <= BATCH * SEQ / 0.05 for r in later)


def test_skip_batches_skips_extra_batches_ahead_of_the_reader_and_records_them(tmp_path):
    rules = {"nan_inf": {"actions": ["alert", "rollback", "skip_batches"], "skip_extra_batches": 5}}
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10,
                          rules=rules)
    prefetch = ds.config.get_prefetch_size()
    ds.config.set_prefetch_size(2)  # the reader runs ahead of the trainer by the pipeline's prefetch depth
    try:
        _, _, source = train([mon], steps=60, poison={44}, skippable=True)
    finally:
        ds.config.set_prefetch_size(prefetch)
    assert [rb["at_step"] for rb in mon.rollbacks] == [45]
    skips = [json.loads(line) for line in open(tmp_path / "events_rank0.jsonl") if '"skip_batches"' in line]
    (skip,) = [s for s in skips if s.get("action") == "skip_batches"]
    first, last = skip["source_positions"]  # counted from 1: batch index i is position i + 1
    assert last - first == 4 and first >= 46  # ahead of what the trainer had consumed (prefetch)
    assert not set(range(first - 1, last)) & set(source.served[:60])  # never handed to the trainer
    assert first - 2 in source.served[:60]  # the batch before them was
    assert mon.trainer_step == 60  # the epoch keeps its length: it ends with batches 0-4 again
    assert source.served[55:60] == [0, 1, 2, 3, 4]


def test_skip_batches_of_a_source_of_samples_batched_in_the_pipeline_skips_whole_batches(tmp_path):
    # the usual shape: GeneratorDataset(SkippableSource(samples)).batch(B): 5 batches are 5 x B samples
    rules = {"nan_inf": {"actions": ["alert", "rollback", "skip_batches"], "skip_extra_batches": 5}}
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10,
                          rules=rules)
    _, _, rows = train([mon], steps=60, poison={44}, skippable=True, rows=True)
    (skip,) = [e for e in map(json.loads, open(tmp_path / "events_rank0.jsonl")) if e.get("action") == "skip_batches"]
    first, last = skip["source_positions"]
    assert skip["batches"] == 5 and last - first + 1 == 5 * BATCH and (first - 1) % BATCH == 0  # whole batches
    assert not set(range(first - 1, last)) & set(rows.served[:60 * BATCH])  # never handed to the trainer
    assert mon.trainer_step == 60


def test_skip_batches_without_a_skippable_source_says_so_and_trains_on(tmp_path, log_lines):
    rules = {"nan_inf": {"actions": ["alert", "rollback", "skip_batches"], "skip_extra_batches": 5}}
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10,
                          rules=rules)
    train([mon], steps=50, poison={44})
    assert mon.trainer_step == 50 and len(mon.rollbacks) == 1
    assert any("not fed by a training_monitor.callbacks.SkippableSource" in line for line in log_lines)


def test_a_slow_model_checkpoint_save_after_the_monitor_is_no_stall(tmp_path):
    """A ModelCheckpoint listed after the monitor saves after the monitor's step end, in the time the watchdog
    watches: a save the monitor knows is due gives the start-up allowance until the next step, so a slow disk
    (each save 2 s here, against a 0.3 s allowance) raises no stall; a step that takes as long still does."""
    class SlowDisk(ModelCheckpoint):
        def _save_ckpt(self, cb_params, force_to_save=False):
            if cb_params.cur_step_num % 10 == 0:
                time.sleep(2.0)
            super()._save_ckpt(cb_params, force_to_save)

    rules = {"stall": {"factor": 10.0, "min_seconds": 0.3, "startup_seconds": 60.0, "startup_steps": 3}}
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, rules=rules)
    saver = SlowDisk("tiny", str(tmp_path / "mc"), CheckpointConfig(save_checkpoint_steps=10, keep_checkpoint_max=5))
    train([mon, saver], steps=30)
    assert len(list((tmp_path / "mc").glob("*.ckpt"))) == 3

    def stalls(folder):
        return [e for e in map(json.loads, (folder / "events_rank0.jsonl").read_text().splitlines())
                if e.get("rule") == "stall"]
    assert stalls(tmp_path) == []
    slow = TrainingMonitor(output_dir=str(tmp_path / "slow"), metrics_port=None, rules=rules)
    train([slow, AtStep(lambda cb: time.sleep(2.0) if cb.cur_step_num == 15 else None)], steps=20)
    assert [e["step"] for e in stalls(tmp_path / "slow")] == [15]


def test_a_world_size_without_communication_is_an_error_and_training_goes_on(tmp_path, log_lines):
    # RANK_SIZE set (a launcher's environment) in a process that never called mindspore.communication.init():
    # a collective there ends the process, so the consensus is off and an error says why
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=port - 1, world_size=2, rank=1)
    train([mon], steps=5)
    assert mon.last_record.step == 5
    assert any("communication is not initialised" in line for line in log_lines)
    assert mon.metrics_url == f"http://127.0.0.1:{port}/metrics"  # port + this rank (not 0: before init())
    mon.close()


def test_the_monitor_keeps_its_newest_checkpoints_and_its_rollback_target(tmp_path):
    # a checkpoint every 5 steps for 60 steps, keep_checkpoints 2: the files of the two newest, the pending ones
    # and the newest healthy one stay; the older ones are deleted and marked so in the ledger; a NaN batch at
    # step 45 still rolls back to the newest healthy checkpoint (35), whose file was kept until then
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=5, healthy_after=5,
                          keep_checkpoints=2)
    train([mon], steps=60, poison={44})
    (rb,) = mon.rollbacks
    assert (rb["at_step"], rb["to_step"]) == (45, 35) and mon.stop_reason is None  # loaded (40: still pending)
    on_disk = sorted(p.name for p in mon.ckpt_dir.glob("*.ckpt"))
    live = [e for e in mon.ledger.entries if e.status != "deleted"]
    assert on_disk == sorted(os.path.basename(e.path) for e in live) and 2 <= len(on_disk) <= 4
    gone = [e for e in mon.ledger.entries if e.status == "deleted"]
    assert gone and all(not os.path.exists(e.path) and "keep_checkpoints=2" in e.reason for e in gone)
    # 0 keeps every file
    every = TrainingMonitor(output_dir=str(tmp_path / "all"), metrics_port=None, checkpoint_every=5, healthy_after=5,
                            keep_checkpoints=0)
    train([every], steps=30)
    assert len(list(every.ckpt_dir.glob("*.ckpt"))) == 6
