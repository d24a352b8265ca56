"""Detectors, rules files and the engine, on synthetic record streams (no framework needed)."""
import math

import pytest

from monitor.engine import Engine
from monitor.record import StepRecord
from monitor.rules import Rules, RulesError


def noisy_losses(n, start=3.0, seed=0):
    import random
    rng = random.Random(seed)
    return [start * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(n)]


def run(records, rules=None):
    eng = Engine(rules or Rules.load())
    for r in records:
        eng.observe(r)
    return eng.events


def test_healthy_noisy_run_raises_nothing():
    losses = noisy_losses(500)
    recs = [StepRecord(i + 1, loss=x, grad_norm=1 + 0.1 * (i % 7), overflow=False) for i, x in enumerate(losses)]
    assert run(recs) == []


def test_noisy_decreasing_start_is_not_a_spike():
    # a fresh run: loss falls from ~11 to ~3 with big step-to-step noise during the first steps
    recs = [StepRecord(i + 1, loss=3 + 8 * math.exp(-i / 15) * (1 + 0.3 * ((-1) ** i)))
            for i in range(200)]
    assert [e.rule for e in run(recs)] == []


def test_nan_loss_fires_at_its_step():
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate(noisy_losses(50))]
    recs.append(StepRecord(51, loss=math.nan))
    (ev,) = run(recs)
    assert (ev.rule, ev.step, ev.onset_step, ev.severity) == ("nan_inf", 51, 51, "critical")
    assert "rollback" in ev.actions and ev.to_dict()["value"] == "nan"


def test_inf_grad_norm_on_an_overflow_step_is_the_loss_scale_s_job():
    recs = [StepRecord(1, loss=3.0, grad_norm=math.inf, overflow=True, loss_scale=65536.0)]
    assert run(recs) == []
    assert [e.rule for e in run([StepRecord(1, loss=3.0, grad_norm=math.inf, overflow=False)])] == ["nan_inf"]


def test_loss_spike_with_onset_at_the_start_of_the_excursion():
    losses = noisy_losses(100)
    # a two-step climb then a spike: onset is where the climb began
    losses += [3.5, 3.9, 9.0]
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate(losses)]
    events = run(recs)
    spikes = [e for e in events if e.rule == "loss_spike"]
    assert spikes and spikes[0].step == 102 and spikes[0].onset_step == 101


def test_warmup_steps_are_not_judged():
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate([10.0, 3, 3, 3, 30.0] + noisy_losses(20))]
    assert run(recs) == []


def test_grad_norm_spike_ignores_overflow_steps():
    recs = [StepRecord(i + 1, loss=3.0, grad_norm=1.0 + 0.05 * (i % 5), overflow=False) for i in range(60)]
    recs.append(StepRecord(61, loss=3.0, grad_norm=500.0, overflow=True))
    assert run(recs) == []
    recs.append(StepRecord(62, loss=3.0, grad_norm=50.0, overflow=False))
    (ev,) = run(recs)
    assert (ev.rule, ev.step, ev.severity) == ("grad_norm_spike", 62, "warning")


def test_overflow_storm_after_calibration_only():
    calib = [StepRecord(i + 1, loss=3.0, overflow=True, loss_scale=2.0 ** (32 - i)) for i in range(10)]
    clean = [StepRecord(11 + i, loss=3.0, overflow=False, loss_scale=2.0 ** 22) for i in range(30)]
    assert run(calib + clean) == []
    storm = [StepRecord(41 + 2 * i, loss=3.0, overflow=True, loss_scale=2.0 ** (21 - i)) for i in range(5)]
    (ev,) = run(calib + clean + storm)
    assert (ev.rule, ev.step, ev.onset_step, ev.value) == ("overflow_storm", 49, 41, 5.0)


def test_same_records_same_events_and_rewind_forgets_the_future():
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate(noisy_losses(80))] + [StepRecord(81, loss=20.0)]
    a, b = run(recs), run(recs)
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b] and len(a) == 1
    # after a rollback to step 60 the same spike is judged again (history after 60 dropped, cooldown reset)
    eng = Engine()
    for r in recs:
        eng.observe(r)
    for r in recs[60:]:
        eng.observe(r)
    assert [e.step for e in eng.events] == [81, 81]


def test_a_sink_that_raises_does_not_stop_detection():
    def broken(event):
        raise OSError("disk full")

    eng = Engine(sinks=[broken])
    assert [e.rule for e in eng.observe(StepRecord(1, loss=math.inf))] == ["nan_inf"]


def test_rules_file_overrides_and_errors_name_file_line_key(tmp_path):
    good = tmp_path / "rules.yaml"
    good.write_text("loss_spike:\n  threshold: 3.5\n  actions: [alert]\nnan_inf:\n  enabled: false\n")
    rules = Rules.load(good)
    assert rules.rules["loss_spike"].params["threshold"] == 3.5
    assert rules.rules["loss_spike"].actions == ("alert",)
    assert [d.cfg.id for d in rules.detectors()] == ["loss_spike", "grad_norm_spike", "overflow_storm"]

    cases = {
        "loss_spike:\n  threshold: high\n": ":2: loss_spike.threshold: expected a non-negative number",
        "loss_spike:\n  window: 10\n  treshold: 3\n": ":3: loss_spike.treshold: unknown setting",
        "lose_spike:\n  threshold: 3\n": ":1: lose_spike: unknown rule",
        "nan_inf:\n  actions: [page]\n": ":2: nan_inf.actions: expected a list of alert, rollback, stop",
        "nan_inf:\n  severity: fatal\n": ":2: nan_inf.severity: expected one of info, warning, critical",
        "nan_inf: [\n": ": not valid YAML",
    }
    for text, expected in cases.items():
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(RulesError) as err:
            Rules.load(bad)
        assert str(err.value).startswith(str(bad)) and expected in str(err.value), str(err.value)
    with pytest.raises(RulesError, match="cannot read rules file"):
        Rules.load(tmp_path / "missing.yaml")
