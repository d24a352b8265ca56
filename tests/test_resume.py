"""Crashes and restarts: live resume after a real kill -9, verified checkpoints, the record log of a crashed run."""
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest

from train_helpers import AtStep, loaded, train
from training_monitor.callbacks import TrainingMonitor
from training_monitor.engine import Engine
from training_monitor.ledger import file_checksum
from training_monitor.recordlog import FIELDS
from training_monitor.replay import replay_file
from training_monitor.resume import checkpoint_file

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

JOB = Path(__file__).parent / "jobs" / "crash_resume.py"
RANKS_JOB = Path(__file__).parent / "jobs" / "resume_ranks.py"
ROOT = Path(__file__).parent.parent


def start(out, *args):
    return subprocess.Popen([sys.executable, str(JOB), str(out), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=open(Path(out) / f"stderr-{args[0]}.txt", "w"), text=True, cwd=ROOT)


def wait_for(proc, line: str, timeout: float = 300) -> None:
    """Wait until the job prints ``line`` (it then hangs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 1.0)[0]:
            got = proc.stdout.readline()
            assert got, f"job ended (status {proc.wait()}) before printing {line!r}"
            if got.strip() == line:
                return
    raise AssertionError(f"job did not print {line!r} within {timeout} s")


def kill9(proc) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL


def rows(path):
    """The record log's lines after its header, each checked to be a whole row."""
    lines = Path(path).read_text().splitlines()
    assert lines[0] == ",".join(FIELDS)
    assert all(len(line.split(",")) == len(FIELDS) for line in lines[1:]), "a torn row"
    return lines[1:]


def key(e):
    return e["rule"], e["step"], e["onset_step"], str(e["value"]), e["trainer_step"]


# resumed from the newest checkpoint (pending), or from an older one with the killed process's rows past it in the
# record log (its steps 31 to 40 are done again: replay forgets them as the resumed process never saw them)
@pytest.mark.parametrize("resumed, target", [(40, 30), (30, 30)])
def test_a_killed_run_resumed_from_its_checkpoint_catches_a_fault_at_once_and_rolls_back_before_the_restart(
        tmp_path, resumed, target):
    first = start(tmp_path, "hang", 47)
    wait_for(first, "at 47")
    deadline = time.monotonic() + 60  # the checksums are computed in the background: let them finish
    while time.monotonic() < deadline and '"checksum": null' in (tmp_path / "ledger_rank0.json").read_text():
        time.sleep(0.2)
    kill9(first)
    # kill -9 loses at most the last 9 rows (rows are flushed every 10, whole)
    records = tmp_path / "records_rank0.csv"
    before = rows(records)
    assert int(before[-1].split(",")[0]) >= 47 - 9
    (old,) = tmp_path.glob("ledger_rank0.json")
    ledger = json.loads(old.read_text())
    assert ledger["run"] == "resume-test"
    assert [(e["step"], e["status"]) for e in ledger["checkpoints"]] == [
        (10, "healthy"), (20, "healthy"), (30, "healthy"), (40, "pending")]
    for e in ledger["checkpoints"]:
        assert (e["checksum"], e["size"]) == file_checksum(e["path"])
    pre = {e["step"]: e["path"] for e in ledger["checkpoints"]}

    # a NEW process loads the checkpoint and resumes; LR x30 for the update after its 4th step
    second = subprocess.run([sys.executable, str(JOB), str(tmp_path), "resume", pre[resumed], "4"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    out = json.loads((tmp_path / "resumed.json").read_text())
    carried = [s for s in pre if s <= resumed]
    assert out["resumed"] == {"step": resumed, "records": resumed, "carried": carried}
    spikes = [e for e in out["events"] if "rollback" in e["actions"]]
    assert spikes and spikes[0]["step"] <= resumed + 10, "the fault after the resume was not caught within 10 steps"
    assert spikes[0]["trainer_step"] == spikes[0]["step"] - resumed  # the new process's trainer counts from 1
    (rb, *_) = out["rollbacks"]
    # a pending resumed checkpoint (40) is no target: either way the rollback lands on step 30, saved before the restart
    assert rb["at_step"] == spikes[0]["step"] and rb["to_step"] == target and rb["checkpoint"] == pre[target]
    assert out["instance"] not in pre[target]
    status = {(e["step"], e["path"]): e["status"] for e in out["ledger"]}
    assert status[(target, pre[target])] == "healthy"
    assert resumed == target or status[(resumed, pre[resumed])] == "quarantined"

    # live = replay across the crash: replaying the record log gives the resumed process's events, with the trainer's
    # step numbers ...
    lines = rows(records)
    head, cut = ",".join(FIELDS), len(before)
    assert resumed == 40 or int(before[-1].split(",")[0]) > resumed  # (rows of the killed process past the checkpoint)
    (tmp_path / "first.csv").write_text("\n".join([head, *lines[:cut]]) + "\n")
    whole = [key(e.to_dict()) for e in replay_file(str(records)).events]
    earlier = [key(e.to_dict()) for e in replay_file(str(tmp_path / "first.csv")).events]
    assert whole[:len(earlier)] == earlier and whole[len(earlier):] == [key(e) for e in out["events"]]


def test_a_run_killed_in_its_first_step_is_replayed_from_its_event_log(tmp_path):
    job = start(tmp_path, "first-hang")
    wait_for(job, "at 1")  # step 1 hangs before the monitor sees it; the watchdog reports the stall
    events = tmp_path / "events_rank0.jsonl"
    deadline = time.monotonic() + 60
    while not (events.exists() and '"stall"' in events.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)
    kill9(job)
    assert rows(tmp_path / "records_rank0.csv") == []  # the header was written at once, no row reached the file
    out = subprocess.run([sys.executable, "-m", "training_monitor.cli", "replay", "--json", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["format"][0] == "events" and [a["rule"] for a in result["anomalies"]] == ["stall"]


def test_a_job_that_loaded_a_checkpoint_without_resume_from_is_told_what_it_loses(tmp_path, log_lines):
    first = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10)
    train([first], steps=10)
    (saved,) = first.ledger.entries

    def loaded(net, opt):
        cell = ms.nn.TrainOneStepCell(net, opt)
        ms.load_param_into_net(cell, ms.load_checkpoint(saved.path))
        return cell

    train([TrainingMonitor(output_dir=str(tmp_path), metrics_port=None)], steps=3, cell=loaded)
    assert any("the network's global step is 10 at the start: if this job resumed from a checkpoint, set "
               "resume_from to it" in line for line in log_lines)


def test_model_checkpoint_files_of_the_last_step_are_ledgered_and_resumable(tmp_path, monkeypatch):
    from mindspore.train import CheckpointConfig, ModelCheckpoint

    from training_monitor.resume import resume

    def saver(name):
        return ModelCheckpoint(name, name, CheckpointConfig(save_checkpoint_steps=10))

    monkeypatch.chdir(tmp_path)  # folders relative to the working directory, as scripts name them
    after = TrainingMonitor(output_dir="after", metrics_port=None, run="mc")
    train([after, saver("after")], steps=30)  # saved after our step end: step 30's file is seen at the end
    assert [e.step for e in after.ledger.entries] == [10, 20, 30]
    # ledgered by absolute path: a restart from another working directory finds them
    assert [e.path for e in after.ledger.entries] == [str(tmp_path / "after" / f"after-1_{s}.ckpt") for s in (10, 20, 30)]
    assert after.ledger.wait(30)
    last = after.ledger.entries[-1]
    (tmp_path / "after" / "ledger_rank0.json").rename(tmp_path / "after" / "ledger_rank0.before-x.json")
    done = resume(Engine(), last.path, str(tmp_path / "after"), 0, "mc", after.record_log.path)
    assert (done.entry.step, done.records) == (30, 30)
    before = TrainingMonitor(output_dir=str(tmp_path / "before"), metrics_port=None)
    train([saver("before"), before], steps=25)  # ModelCheckpoint's end() saves step 25 before our end
    assert [(e.step, os.path.basename(e.path)) for e in before.ledger.entries][-1] == (25, "before-1_25.ckpt")


def test_a_resume_from_another_working_directory_finds_checkpoints_ledgered_by_relative_path(tmp_path, monkeypatch):
    """Framework-free: a ledger whose paths are relative to the first process's working directory (run7/..), and a
    restart from another directory naming the checkpoint by its absolute path: the earlier ones stay targets."""
    from training_monitor.ledger import Ledger
    from training_monitor.record import StepRecord
    from training_monitor.recordlog import RecordLog
    from training_monitor.resume import resume, trajectory

    run = tmp_path / "work" / "run7"
    run.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    log = RecordLog("run7/records_rank0.csv")
    ledger = Ledger("run7/ledger_rank0.json", healthy_after=5, run="r", checksums=True)
    for s in range(1, 31):
        log.on_record(StepRecord(s, 3.0, 1.0))
        ledger.observe(s)
        if s % 10 == 0:
            Path(f"run7/{s}.ckpt").write_bytes(bytes([s]) * 4096)
            ledger.add(s, f"run7/{s}.ckpt", s, records=trajectory(log, None))
    assert ledger.wait(10)
    (run / "ledger_rank0.json").rename(run / "ledger_rank0.before-x.json")  # (as a new process moves it aside)
    monkeypatch.chdir(tmp_path)
    done = resume(Engine(), str(run / "30.ckpt"), str(run), 0, "r", str(run / "records_rank0.csv"))
    assert [(e.step, e.path) for e in done.carried] == [(s, str(run / f"{s}.ckpt")) for s in (10, 20, 30)]


def test_corrupted_checkpoint_in_the_middle_is_quarantined_and_the_older_healthy_one_loaded(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10)
    corrupted = {}

    def corrupt(cb):
        if cb.cur_step_num == 44:  # 4 KiB overwritten in the middle of the newest healthy checkpoint (step 30)
            assert mon.ledger.wait(60), "checksums still being computed"
            path = next(e.path for e in mon.ledger.entries if e.step == 30)
            size = os.path.getsize(path)
            with open(path, "r+b") as f:
                f.seek(size // 2)
                f.write(np.random.default_rng(0).bytes(4096))
            corrupted["params"] = ms.load_checkpoint(path)  # MindSpore itself loads it without complaint

    train([mon, AtStep(corrupt)], steps=50, poison={44})
    assert corrupted["params"]
    (rb,) = mon.rollbacks
    assert rb["to_step"] == 20
    bad = next(e for e in mon.ledger.entries if e.step == 30)
    assert bad.status == "quarantined" and "checksum mismatch" in bad.reason


def test_resume_restores_the_detectors_and_carries_only_the_checkpoints_on_the_resumed_trajectory(tmp_path, log_lines):
    """Framework-free: a 'process' that rolls back once and saves, then a resume from its last checkpoint."""
    from training_monitor.ledger import Ledger
    from training_monitor.record import StepRecord
    from training_monitor.recordlog import RecordLog
    from training_monitor.resume import ChangedCheckpoint, ResumeError, restore, resume, trajectory
    from training_monitor.sinks import EventList

    rng = np.random.default_rng(0)
    log = RecordLog(str(tmp_path / "records_rank0.csv"))
    ledger = Ledger(str(tmp_path / "ledger_rank0.json"), healthy_after=5, run="r", checksums=True)
    reference, fed = Engine(), []

    def step(s):
        rec = StepRecord(s, 3.0 + 0.05 * rng.standard_normal(), 1.0 + 0.05 * rng.standard_normal())
        log.on_record(rec)
        reference.observe(rec)
        fed.append(rec)
        ledger.observe(s)

    def save(s, name):
        (tmp_path / name).write_bytes(rng.bytes(4096))
        return ledger.add(s, str(tmp_path / name), s, records=trajectory(log, None))

    for s in range(1, 41):
        step(s)
        if s % 10 == 0:
            save(s, f"{s}.ckpt")
    for s in range(21, 36):  # a rollback to step 20: the checkpoint at 30 is not on the way any more
        step(s)
    last = save(35, "35.ckpt")
    for s in range(36, 39):  # steps after the save, then the crash (the rows were flushed or not)
        step(s)
    assert ledger.wait(10)
    (tmp_path / "ledger_rank0.json").rename(tmp_path / "ledger_rank0.before-x.json")

    kept = EventList()
    engine = Engine(sinks=[kept])
    done = resume(engine, last.path, str(tmp_path), 0, "r", log.path)
    assert done.records == 55 and [e.step for e in done.carried] == [10, 20, 35]
    # the detectors are where they were at the save: both engines judge a spike after it alike
    reference.rewind(35)
    for s in range(36, 60):
        rec = StepRecord(s, 9.0 if s == 45 else 3.0 + 0.05 * rng.standard_normal(), 1.0)
        assert [e.rule for e in engine.observe(rec)] == [e.rule for e in reference.observe(rec)]
    assert any(e.rule == "loss_spike" for e in kept.events) and min(e.step for e in kept.events) > 35
    # a copy of the file is found by its checksum; another run's ledger or a changed file is refused
    copy = tmp_path / "copy.ckpt"
    copy.write_bytes(Path(last.path).read_bytes())
    assert resume(Engine(), str(copy), str(tmp_path), 0, "r", log.path).entry.step == 35
    with pytest.raises(ResumeError, match="in no ledger of run 'other'.*ledgers of other runs: r"):
        resume(Engine(), last.path, str(tmp_path), 0, "other", log.path)
    # the run's folder copied elsewhere: the checkpoints are taken where the resumed one was found; one deleted
    # (there and in the old folder) from the hard link the monitor kept of it; one gone altogether is named
    moved = tmp_path / "moved"
    moved.mkdir()
    for f in tmp_path.iterdir():
        if f.is_file():
            shutil.copy2(f, moved / f.name)
    pin = moved / "checkpoints" / "rank_0" / "20260101T000000-1-1" / "kept" / "3-10.ckpt"
    pin.parent.mkdir(parents=True)
    (moved / "10.ckpt").rename(pin)
    for name in ("10.ckpt", "20.ckpt"):
        for folder in (tmp_path, moved):
            (folder / name).unlink(missing_ok=True)
    done = resume(Engine(), str(moved / "35.ckpt"), str(moved), 0, "r", str(moved / "records_rank0.csv"))
    assert [(e.step, e.path) for e in done.carried] == [(10, str(pin)), (35, str(moved / "35.ckpt"))]
    assert any("1 checkpoint(s) from before the restart on the way to step 35 are no rollback target: their "
               f"files are gone ({tmp_path / '20.ckpt'})" in line for line in log_lines)
    # a file written over since it was saved (same size) is no longer the step's; one of another size was
    # not verifiable (a checksum of a file still being written), the run starts afresh
    fresh = Ledger(None)
    with open(last.path, "r+b") as f:
        f.write(b"\0" * 16)
    with pytest.raises(ChangedCheckpoint, match="recorded when step 35 was saved"):
        restore(Engine(), fresh, last.path, str(tmp_path), 0, "r", log)
    with open(last.path, "ab") as f:
        f.write(b"\0")
    with pytest.raises(ResumeError, match=r"\(4097 bytes, 4096 then\)") as grown:
        restore(Engine(), fresh, last.path, str(tmp_path), 0, "r", log)
    assert not isinstance(grown.value, ChangedCheckpoint) and fresh.entries == []
    # a malformed ledger is a failure to restore too, never another exception into the trainer
    broken = json.loads((tmp_path / "ledger_rank0.before-x.json").read_text())
    (at_30,) = [e for e in broken["checkpoints"] if e["step"] == 30]
    broken["run"], at_30["records"] = "r2", "garbage"
    (tmp_path / "ledger_rank0.before-y.json").write_text(json.dumps(broken))
    with pytest.raises(ResumeError, match="ValueError"):
        restore(Engine(), fresh, at_30["path"], str(tmp_path), 0, "r2", log)


def test_a_checkpoint_the_monitor_deleted_is_no_target_and_not_warned_about_on_resume(tmp_path, log_lines):
    # keep_checkpoints deleted step 10's file and the ledger marked it `deleted` then: a resume carries the others
    # and does not warn that its file is gone (a file that vanished unknown to the ledger is warned about, above)
    from training_monitor.ledger import DELETED, Ledger
    from training_monitor.record import StepRecord
    from training_monitor.recordlog import RecordLog
    from training_monitor.resume import resume, trajectory

    log = RecordLog(str(tmp_path / "records_rank0.csv"))
    ledger = Ledger(str(tmp_path / "ledger_rank0.json"), healthy_after=5, run="r", checksums=True)
    saved = {}
    for s in range(1, 31):
        log.on_record(StepRecord(s, 3.0 + 0.01 * (s % 3), 1.0))
        ledger.observe(s)
        if s % 10 == 0:
            (tmp_path / f"{s}.ckpt").write_bytes(os.urandom(4096))
            saved[s] = ledger.add(s, str(tmp_path / f"{s}.ckpt"), s, records=trajectory(log, None))
    (tmp_path / "10.ckpt").unlink()
    ledger.quarantine(saved[10], "file deleted (checkpoint retention)", DELETED)
    assert ledger.wait(10)
    (tmp_path / "ledger_rank0.json").rename(tmp_path / "ledger_rank0.before-x.json")
    done = resume(Engine(), saved[30].path, str(tmp_path), 0, "r", log.path)
    assert [e.step for e in done.carried] == [20, 30]
    assert not any("files are gone" in line for line in log_lines)

def msrun(out, *args):
    """Run RANKS_JOB as a real 2-rank msrun job; its status."""
    bin_dir = os.path.dirname(sys.executable)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [shutil.which("msrun", path=bin_dir), "--worker_num=2", "--local_worker_num=2", f"--master_port={port}",
           f"--log_dir={out / ('logs-' + args[0])}", "--join=True", str(RANKS_JOB), str(out), *args]
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
    return subprocess.run(cmd, env=env, cwd=out, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          timeout=300).returncode


def test_two_ranks_resume_together_or_both_start_afresh(tmp_path):
    ok, broken = tmp_path / "ok", tmp_path / "broken"
    ok.mkdir()
    assert msrun(ok, "first") == 0
    shutil.copytree(ok, broken)
    # each rank finds its own file (resume_from has {rank}) and restores the windows and its checkpoints
    assert msrun(ok, "resume") == 0
    for r in (0, 1):
        assert json.loads((ok / f"resumed_rank{r}.json").read_text()) == {"resumed": 30, "carried": [10, 20, 30],
                                                                           "last_step": 40,
                                                                           "healthy": [10, 20, 30]}
    # the job stopped between the ranks' promotions of step 30 (at step 35): healthy in rank 0's ledger, pending
    # in rank 1's. Both take it as pending, so both check the weights (a collective) before promoting it again
    # at step 35; with rank 1 alone entering it, its AllReduce met rank 0's gradient reduction and the job died
    diverged = tmp_path / "diverged"
    shutil.copytree(broken, diverged)
    ledger = diverged / "ledger_rank1.json"
    entries = json.loads(ledger.read_text())
    for e in entries["checkpoints"]:
        if e["step"] == 30:
            e["status"] = "pending"
    ledger.write_text(json.dumps(entries))
    assert msrun(diverged, "resume") == 0
    for r in (0, 1):
        assert json.loads((diverged / f"resumed_rank{r}.json").read_text()) == {
            "resumed": 30, "carried": [10, 20, 30], "last_step": 40, "healthy": [10, 20, 30]}
    assert "checkpoint(s) of step(s) 30 are healthy in this rank's ledger but not in every rank's" in (
        diverged / "logs-resume" / "worker_0.log").read_text()
    # rank 1's record log lost its rows (the copy's checkpoints are found by checksum): neither rank restores
    head = (broken / "records_rank1.csv").read_text().splitlines()[0]
    (broken / "records_rank1.csv").write_text(head + "\n")
    assert msrun(broken, "resume") == 0
    for r in (0, 1):
        assert json.loads((broken / f"resumed_rank{r}.json").read_text()) == {"resumed": None, "carried": [],
                                                                               "last_step": 10, "healthy": []}
    # rank 1 loads its step-20 file, rank 0 its step-30 one (a per-rank "newest file" after a save cut short):
    # both stop at once, saying so (the monitor ends a run it stopped with exit status 1), rather than train on
    # different weights until their collectives no longer pair up
    mismatch = tmp_path / "mismatch"
    shutil.copytree(ok, mismatch)
    assert msrun(mismatch, "mismatch") == 1
    for r in (0, 1):
        log = (mismatch / "logs-mismatch" / f"worker_{r}.log").read_text()
        assert (f"stopping the run: the ranks resumed from checkpoints of different steps (rank 0's is step 30, "
                f"this rank's step {30 if r == 0 else 20}, ") in log, log[-3000:]


def test_a_resumed_run_takes_up_its_rollback_budget_and_lr_multiplier(tmp_path):
    # a run rolled back once (LR x0.5) and kept checkpointing; a new monitor resumes from a checkpoint saved
    # after that rollback, named by a pattern (the folder is the killed process's): its next rollback compounds
    # the LR cut (x0.25), and the one after exhausts the budget of 2 counted over the run, not the process
    settings = dict(output_dir=str(tmp_path), metrics_port=None, run="budget", checkpoint_every=10, healthy_after=10,
                    max_rollbacks=2)
    first = TrainingMonitor(**settings)
    train([first], steps=60, poison={24})
    (rb,) = first.rollbacks
    assert rb["lr_multiplier"] == 0.5 and first.ledger.wait(60)
    entry = [e for e in first.ledger.entries if e.rollbacks == 1 and e.status == "healthy"][-1]
    assert entry.lr_multiplier == 0.5

    pattern = str(tmp_path / "checkpoints" / "rank_{rank}" / "*" / os.path.basename(entry.path))
    second = TrainingMonitor(resume_from=pattern, **settings)
    with pytest.raises(SystemExit, match=r"rollback budget exhausted: 2 rollbacks done \(max_rollbacks=2\)"):
        train([second], steps=60, poison={5, 40}, cell=loaded(checkpoint_file(pattern.format(rank=0))))
    assert second.resumed is not None and second.resumed.entry.step == entry.step
    (rb,) = second.rollbacks
    assert rb["lr_multiplier"] == 0.25


def test_a_resumed_run_keeps_its_newest_checkpoints_over_its_processes(tmp_path):
    # keep_checkpoints 2 over a run restarted from a checkpoint: the files the killed process saved count with the
    # resumed one's (a run restarted hundreds of times keeps N files, not N per process): the older ones are
    # deleted and marked so in the resumed process's ledger, the newest healthy one and the pending ones kept
    settings = dict(output_dir=str(tmp_path), metrics_port=None, run="kept", checkpoint_every=5, healthy_after=5,
                    keep_checkpoints=2)
    first = TrainingMonitor(**settings)
    train([first], steps=30)
    assert first.ledger.wait(60)
    entry = [e for e in first.ledger.entries if e.status == "healthy"][-1]
    pattern = str(tmp_path / "checkpoints" / "rank_{rank}" / "*" / os.path.basename(entry.path))
    second = TrainingMonitor(resume_from=pattern, **settings)
    train([second], steps=30, cell=loaded(checkpoint_file(pattern.format(rank=0))))
    assert second.resumed is not None and second.instance != first.instance
    # (the killed process's file past the one resumed from, step 30, is on no trajectory of this process: kept)
    on_disk = sorted(str(p) for p in (tmp_path / "checkpoints" / "rank_0").glob("*/*.ckpt"))
    live = sorted(e.path for e in second.ledger.entries if e.status != "deleted")
    after = [e.path for e in first.ledger.entries if e.step > entry.step]
    assert on_disk == sorted(live + after) and 2 <= len(live) <= 4 and len(after) == 1
    old = [e for e in second.ledger.entries if first.instance in e.path]
    assert old and all(e.status == "deleted" and "keep_checkpoints=2" in e.reason for e in old)

def test_a_resume_whose_loader_leaves_the_lr_scale_out_runs_at_the_run_s_lr_multiplier(tmp_path, log_lines):
    # MindFormers' resume loads the network's and the optimizer's parameters but not a ScaledLearningRate's
    # scale ('Optimizer parameters are not loaded: monitor_lr_scale'): the schedule would run at x1 after a
    # rollback's x0.5; the resumed monitor sets the scale to the run's multiplier
    from training_monitor.callbacks import ScaledLearningRate
    settings = dict(output_dir=str(tmp_path), metrics_port=None, run="scale", checkpoint_every=10, healthy_after=10)
    first = TrainingMonitor(**settings)
    train([first], steps=60, poison={24}, lr=ScaledLearningRate(ms.nn.CosineDecayLR(0.01, 0.05, 100)))
    entry = [e for e in first.ledger.entries if e.rollbacks == 1 and e.status == "healthy"][-1]
    assert first.ledger.wait(60) and entry.lr_multiplier == 0.5

    def cell(net, opt):
        step_cell = ms.nn.TrainOneStepCell(net, opt)
        params = ms.load_checkpoint(entry.path)
        assert [k for k in params if k.endswith("scale")]  # the checkpoint holds the scale: the loader skips it
        ms.load_param_into_net(step_cell, {k: v for k, v in params.items() if not k.endswith("scale")})
        return step_cell

    seen = []
    second = TrainingMonitor(resume_from=entry.path, **settings)
    lr = ScaledLearningRate(ms.nn.CosineDecayLR(0.01, 0.05, 100))
    train([second, AtStep(lambda cb: seen.append(float(lr.scale.asnumpy())))], steps=3, cell=cell, lr=lr)
    assert second.resumed is not None and seen == [0.5, 0.5, 0.5]
    assert any("the LR scale loaded is x1, the run's rollbacks left x0.5: set to x0.5" in line for line in log_lines)


@pytest.mark.parametrize("on_failed", ["stop", "continue"])
def test_a_resume_from_a_checkpoint_written_over_since_its_save_does_not_train_on_silently(tmp_path, on_failed):
    # MindSpore loads a checkpoint with bytes overwritten in its middle; its checksum in the ledger says the
    # weights loaded are not its step's: the run stops as a failed rollback does (or, with
    # on_failed_rollback: continue, goes on afresh), and the event log says why
    settings = dict(output_dir=str(tmp_path), metrics_port=None, run="over", checkpoint_every=10,
                    on_failed_rollback=on_failed)
    first = TrainingMonitor(**settings)
    train([first], steps=30)
    assert first.ledger.wait(60)
    path = first.ledger.entries[-1].path
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        f.write(np.random.default_rng(0).bytes(400))
    cell = loaded(path)

    second = TrainingMonitor(resume_from=path, **settings)
    if on_failed == "stop":
        with pytest.raises(SystemExit, match="resumed from a checkpoint written over since it was saved: .*"
                                             "recorded when step 30 was saved"):
            train([second], steps=10, cell=cell)
    else:
        train([second], steps=10, cell=cell)
    assert second.resumed is None and second.trainer_step == (1 if on_failed == "stop" else 10)
    logged = [json.loads(line) for line in (tmp_path / "events_rank0.jsonl").read_text().splitlines()]
    (failed,) = [e for e in logged if e.get("action") == "resume_failed"]
    assert failed["checkpoint"] == path and "recorded when step 30 was saved" in failed["reason"]
    assert [e["action"] for e in logged if "action" in e][1:] == (["stop"] if on_failed == "stop" else [])


def test_another_run_in_the_same_output_folder_is_told_it_shares_the_logs(tmp_path, log_lines):
    train([TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, run="first", checkpoint_every=2)], steps=3)
    assert not any("holds the records of an earlier process" in line for line in log_lines)
    # the same run started again afresh (no resume_from): its records follow the earlier ones, and it is told so
    train([TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, run="first", checkpoint_every=2)], steps=3)
    assert not any("holds run" in line for line in log_lines)
    assert any(f"{tmp_path / 'records_rank0.csv'} holds the records of an earlier process; this one's follow them "
               "without its state (no resume_from)" in line for line in log_lines)
    train([TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, run="second", checkpoint_every=2)], steps=3)
    assert any(f"{tmp_path} holds run 'first' (its ledger); run 'second' appends its records and events to the "
               "same logs" in line for line in log_lines)


def test_a_resume_onto_weights_that_are_not_finite_stops_the_run(tmp_path, log_lines):
    # the weights go NaN at step 15 (rollback off); ModelCheckpoint's later files hold them, the last one still
    # pending in the ledger. Resuming from it must not train on: the monitor checks the weights the trainer loaded
    from mindspore.train import CheckpointConfig, ModelCheckpoint

    def poison(cb):
        if cb.cur_step_num == 15:
            p = cb.train_network.trainable_params()[0]
            p.set_data(ms.Tensor(np.full(p.shape, np.nan, np.float32)))

    settings = dict(output_dir=str(tmp_path), metrics_port=None, run="bad", rollback=False)
    first = TrainingMonitor(**settings)
    saver = ModelCheckpoint("net", str(tmp_path / "ckpt"), CheckpointConfig(save_checkpoint_steps=10))
    train([first, AtStep(poison), saver], steps=30)
    assert first.ledger.wait(60)
    last = first.ledger.entries[-1]
    assert (last.step, last.status) == (30, "pending")

    second = TrainingMonitor(resume_from=last.path, **settings)
    with pytest.raises(SystemExit, match=rf"the weights resumed from {last.path} \(step 30\) are not finite"):
        train([second], steps=10, cell=loaded(last.path))
    assert second.trainer_step == 1  # the step under way when the stop was asked
    assert not any("finite at step 30" in line for line in log_lines)
