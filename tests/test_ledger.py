"""Checkpoint ledger: health states, rollback target, atomic persistence."""
import json

from monitor.ledger import HEALTHY, PENDING, QUARANTINED, Ledger


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
    led.anomaly(onset_step=30)
    assert [e.status for e in led.entries] == [HEALTHY, HEALTHY, QUARANTINED, QUARANTINED]
    assert led.rollback_target(30).step == 20
    assert led.rollback_target(30, margin=15).step == 10
    assert led.rollback_target(5) is None
    led.quarantine(led.rollback_target(30), "failed to load: truncated")
    assert led.rollback_target(30).step == 10 and led.last_healthy_step == 10
