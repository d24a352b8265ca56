"""Checkpoint ledger: health states, rollback target, atomic persistence."""
import json
from pathlib import Path

import pytest

from conftest import require
from training_monitor.ledger import HEALTHY, PENDING, QUARANTINED, Ledger, file_checksum


def test_pending_becomes_healthy_after_clean_steps_and_survives_a_restart(tmp_path):
    path = tmp_path / "ledger.json"
    led = Ledger(str(path), healthy_after=10)
    led.add(25, "a.ckpt")
    assert not led.observe(34) and led.entries[0].status == PENDING
    assert [e.step for e in led.observe(35)] == [25]
    again = Ledger(str(path), healthy_after=10)
    assert [(e.step, e.status) for e in again.entries] == [(25, HEALTHY)]
    assert not list(tmp_path.glob(".ledger-*")), "temporary file left behind"
    assert json.loads(path.read_text())["checkpoints"][0]["path"] == "a.ckpt"


def test_anomaly_quarantines_unproven_checkpoints_and_target_is_before_onset(tmp_path):
    led = Ledger(str(tmp_path / "l.json"), healthy_after=10)
    for step in (10, 20, 30, 40):
        led.add(step, f"{step}.ckpt")
        led.observe(step)
    led.observe(40)  # 10, 20, 30 healthy; 40 pending
    assert [e.status for e in led.entries] == [HEALTHY, HEALTHY, HEALTHY, PENDING]
    led.anomaly(onset_step=31)
    assert [e.status for e in led.entries] == [HEALTHY, HEALTHY, QUARANTINED, QUARANTINED]
    assert led.rollback_target(31).step == 20
    assert led.rollback_target(31, margin=15).step == 10
    assert led.rollback_target(5) is None
    led.quarantine(led.rollback_target(31), "failed to load: truncated")
    assert led.rollback_target(31).step == 10 and led.last_healthy_step == 10


def test_an_anomaly_found_after_a_promotion_its_onset_precedes_takes_the_checkpoint_back(tmp_path):
    # the weights check at step 60 promotes checkpoint 50 and finds the weights NaN since step 56: 50 was
    # promoted on steps 51-60, the excursion among them: not proven
    led = Ledger(str(tmp_path / "l.json"), healthy_after=10)
    for step in (40, 45, 50):
        led.add(step, f"{step}.ckpt")
    led.observe(55)
    assert [e.step for e in led.observe(60)] == [50] and [e.status for e in led.entries] == [HEALTHY] * 3
    led.anomaly(onset_step=56)
    assert [e.status for e in led.entries] == [HEALTHY, HEALTHY, QUARANTINED]
    assert led.rollback_target(56).step == 45


@pytest.mark.slow
@pytest.mark.mindspore
def test_mindformers_legacy_resume_skips_what_the_ledger_does_not_trust(tmp_path):
    """MindFormers' own resume code (tools/resume_ckpt.py) reads the health_ckpts.json we write."""
    require("mindformers")
    from mindformers.tools.resume_ckpt import checkpoint_health_monitor

    from training_monitor.mindformers_layout import write_health_json

    ckpts = [str(tmp_path / "rank_0" / f"llama-1_{s}.ckpt") for s in (100, 200, 300)]
    led = Ledger(None, healthy_after=50, on_change=lambda es: write_health_json(es, str(tmp_path / "health_ckpts.json")))
    for s, path in zip((100, 200, 300), ckpts):
        led.add(s, path)
    led.observe(250)  # 100 and 200 healthy, 300 pending
    led.anomaly(onset_step=310)  # 300 quarantined
    items = json.loads((tmp_path / "health_ckpts.json").read_text())
    assert items == [{"is_health": 0, "ckpt_name": "llama-1_100.ckpt"}, {"is_health": 0, "ckpt_name": "llama-1_200.ckpt"},
                     {"is_health": 1, "ckpt_name": "llama-1_300.ckpt"}]
    # and a restarted job reads the same health back from MindFormers' folder and file
    from training_monitor.mindformers_layout import read_legacy

    for path in ckpts:
        Path(path).parent.mkdir(exist_ok=True)
        Path(path).write_bytes(b"")
    (tmp_path / "rank_0" / "llama-2_50.ckpt").write_bytes(b"")  # epoch 2, not in the health file yet
    back = read_legacy(str(tmp_path / "rank_0"), str(tmp_path / "health_ckpts.json"), steps_per_epoch=1000)
    assert [(e.step, e.status) for e in back] == [(100, HEALTHY), (200, HEALTHY), (300, QUARANTINED),
                                                  (1050, PENDING)]

    # MindFormers reads the file: with healthy entries it accepts the resume list (MindFormers 1.9's filter
    # of the unhealthy ones is inverted, `if not not_health_ckpts`, so it returns the list unchanged) ...
    assert checkpoint_health_monitor(str(tmp_path), list(ckpts)) == ckpts
    # ... and with none healthy it refuses to resume, as its docs say
    led.anomaly(onset_step=50)
    with pytest.raises(ValueError, match="no healthy checkpoints"):
        checkpoint_health_monitor(str(tmp_path), list(ckpts))


@pytest.mark.slow
@pytest.mark.mindspore
def test_mindformers_iteration_layout_resume_picks_the_ledger_s_newest_healthy(tmp_path, monkeypatch):
    """MindFormers' get_healthy_checkpoint_path() picks the iteration our ledger marked healthy."""
    require("mindformers")
    from mindformers.checkpoint.utils import get_healthy_checkpoint_path

    from training_monitor.mindformers_layout import read_iterations, write_iteration_status

    root = tmp_path / "checkpoint"
    for it in (100, 200, 300):
        folder = root / f"iteration_{it:08d}"
        folder.mkdir(parents=True)
        (folder / "common.json").write_text(json.dumps({"global_step": it, "ckpt_status": 0, "loss_scale": 1.0}))
    led = Ledger(None, healthy_after=50, on_change=write_iteration_status)
    for it in (100, 200, 300):
        led.add(it, str(root / f"iteration_{it:08d}"))
    led.observe(250)
    led.anomaly(onset_step=290)  # 300 was still pending: quarantined
    monkeypatch.setenv("LOCAL_DEFAULT_PATH", str(tmp_path))
    assert get_healthy_checkpoint_path().endswith("iteration_00000200")
    assert (root / "latest_checkpointed_iteration.txt").read_text() == "200"
    assert json.loads((root / "iteration_00000300" / "common.json").read_text())["loss_scale"] == 1.0
    back = {e.step: e.status for e in read_iterations(str(root))}
    assert back == {100: HEALTHY, 200: HEALTHY, 300: QUARANTINED}


def test_checksums_are_recorded_in_the_background_and_a_changed_file_fails_verification(tmp_path):
    files = {s: tmp_path / f"{s}.ckpt" for s in (10, 20, 30)}
    for s, f in files.items():
        f.write_bytes(bytes(range(256)) * (64 * s))
    led = Ledger(str(tmp_path / "l.json"), healthy_after=5, checksums=True, run="r")
    entries = [led.add(s, str(f)) for s, f in files.items()]
    assert led.wait(30)
    back = Ledger(str(tmp_path / "l.json"))
    assert back.run == "r"
    assert [(e.checksum, e.size) for e in back.entries] == [file_checksum(str(f)) for f in files.values()]
    led.verify(entries[0])
    with open(files[20], "r+b") as f:  # one byte changed in the middle
        f.seek(f.seek(0, 2) // 2)
        f.write(b"\xff")
    with pytest.raises(ValueError, match="checksum mismatch"):
        led.verify(entries[1])
    with open(files[30], "ab") as f:
        f.write(b"x")
    with pytest.raises(ValueError, match="bytes, .* when saved"):
        led.verify(entries[2])
    files[10].unlink()
    with pytest.raises(OSError):
        led.verify(entries[0])
    with pytest.raises(ValueError, match="no checksum"):
        Ledger(None).verify(Ledger(None).add(40, str(files[30])))
