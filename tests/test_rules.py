"""Detectors, rules files and the engine, on synthetic record streams (no framework needed)."""
import math
from pathlib import Path

import pytest

from training_monitor.detectors import decimals, significant_digits
from training_monitor.engine import Engine
from training_monitor.record import StepRecord
from training_monitor.replay import replay_file
from training_monitor.ruleset import Rules, RulesError
from training_monitor.sinks import EventList, Sink


def noisy_losses(n, start=3.0, seed=0):
    import random
    rng = random.Random(seed)
    return [start * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(n)]


def run(records, rules=None):
    kept = EventList()
    eng = Engine(rules or Rules.load(), [kept])
    for r in records:
        eng.observe(r)
    return kept.events


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


def test_a_learning_rate_not_finite_is_nan_inf_at_its_step_and_the_nan_loss_after_it_the_same_excursion():
    # a schedule that divides by zero: the step's update writes NaN into the weights, the loss is NaN a step later
    recs = [StepRecord(i + 1, loss=x, lr=1e-4) for i, x in enumerate(noisy_losses(50))]
    recs += [StepRecord(51, loss=3.0, lr=math.nan), StepRecord(52, loss=math.nan, lr=math.nan),
             StepRecord(53, loss=math.inf, lr=math.inf)]
    events = run(recs)
    assert [(e.rule, e.step, e.onset_step) for e in events] == [("nan_inf", 51, 51), ("nan_inf", 52, 51),
                                                                 ("nan_inf", 53, 51)]
    assert events[0].message.startswith("learning rate is nan at step 51") and "rollback" in events[0].actions
    # a finite LR again with a finite loss ends the excursion: a later NaN LR is a new onset
    recs += [StepRecord(54, loss=3.0, lr=1e-4), StepRecord(55, loss=3.0, lr=math.nan)]
    assert [(e.step, e.onset_step) for e in run(recs)][-1] == (55, 55)


def test_inf_grad_norm_on_an_overflow_step_is_the_loss_scale_s_job():
    recs = [StepRecord(1, loss=3.0, grad_norm=math.inf, overflow=True, loss_scale=65536.0)]
    assert run(recs) == []
    assert [e.rule for e in run([StepRecord(1, loss=3.0, grad_norm=math.inf, overflow=False)])] == ["nan_inf"]


def test_an_excursion_on_steps_whose_update_was_skipped_asks_no_rollback_until_skipped_run_of_them():
    # the loss scaler skipped each overflowed step's update: the weights did not change there
    base = [StepRecord(i + 1, loss=x, overflow=False) for i, x in enumerate(noisy_losses(60))]
    spike = [StepRecord(61, loss=3e4, overflow=True), StepRecord(62, loss=3.0, overflow=False)]
    nan = [StepRecord(s, loss=math.nan, overflow=True) for s in (63, 64, 65)]
    events = [(e.rule, e.step, e.onset_step, e.actions) for e in run(base + spike + nan) if e.rule != "overflow_storm"]
    assert events == [("loss_spike", 61, 61, ["alert"]), ("nan_inf", 63, 63, ["alert"]),
                      ("nan_inf", 64, 63, ["alert"]), ("nan_inf", 65, 63, ["alert", "rollback"])]
    assert "update was skipped (an overflow)" in run(base + spike)[0].message
    # an update applied all the same (MindYOLO's `overflow, still update`), or no overflow flag: at once
    applied = [StepRecord(61, loss=math.nan, overflow=True, overflow_applied=True)]
    assert [e.actions for e in run(base + applied) if e.rule == "nan_inf"] == [["alert", "rollback"]]
    assert [e.actions for e in run(base + [StepRecord(61, loss=math.nan)])] == [["alert", "rollback"]]
    # skipped_run 0: no event is spared
    rules = Rules({"nan_inf": {"skipped_run": 0}})
    assert [e.actions for e in run(base + nan, rules)][0] == ["alert", "rollback"]


def test_a_loss_near_zero_is_judged_on_its_own_multiplicative_scale():
    # a small task memorised: the loss wanders 0.005-0.08 (its noise grows with its level) and blips to
    # 0.15-0.18 for one record now and then (as minGPT's adder, 0.04 -> 0.178 -> 0.027): no spike; the same
    # blips on a linear scale alone (log_threshold 0) are 6-11 robust sigmas over the median
    import random
    rng = random.Random(1)
    losses = [0.03 * math.exp(0.6 * rng.gauss(0, 1)) for _ in range(300)]
    for step in (150, 220, 260):
        losses[step] = 0.17
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate(losses)]
    assert run(recs) == []
    assert [e.step for e in run(recs, Rules({"loss_spike": {"log_threshold": 0}}))] == [151, 221, 261]
    # a jump far beyond that noise (100x the median, 17x the highest earlier loss) still fires
    losses[200] = 3.0
    assert [(e.rule, e.step) for e in run([StepRecord(i + 1, loss=x) for i, x in enumerate(losses)])] == [
        ("loss_spike", 201)]


def test_loss_spike_with_onset_at_the_start_of_the_excursion():
    losses = noisy_losses(100)
    # a two-step climb then a spike: onset is where the climb began
    losses += [3.5, 3.9, 9.0]
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate(losses)]
    events = run(recs)
    spikes = [e for e in events if e.rule == "loss_spike"]
    assert spikes and spikes[0].step == 102 and spikes[0].onset_step == 101


def test_warmup_steps_are_judged_only_for_an_unambiguous_excursion():
    noisy_start = [10.0, 3, 6, 3, 7.5] + noisy_losses(20)  # a noisy start: within its own range
    assert run([StepRecord(i + 1, loss=x) for i, x in enumerate(noisy_start)]) == []
    (ev,) = run([StepRecord(i + 1, loss=x) for i, x in enumerate([10.0, 3, 3, 3, 30.0] + noisy_losses(20))])
    assert (ev.rule, ev.step, ev.onset_step) == ("loss_spike", 5, 5) and "10x the median" in ev.message


def test_a_warm_up_step_is_judged_for_an_excursion_against_the_last_min_history_values():
    # grad_norm_spike's 100 warm-up steps: a start-up bump (110 at step 5) and a fall to ~1.8, then 86 at step 31
    # (a Megatron-LM pretraining log's iterations 1-30): the bump has left the last 20 values, their range
    # (1.3-2.8) is the level's own noise
    import random
    rng = random.Random(3)
    norms = [12.0, 12.0, 12.3, 14.5, 110.0, 39.0, 21.0, 10.0, 6.0, 5.4] + [1.3 + 1.5 * rng.random() for _ in range(20)]
    recs = [StepRecord(i + 1, loss=8.0 - 0.01 * i, grad_norm=x) for i, x in enumerate(norms)]
    assert run(recs) == []  # the bump: under 10x the median of the 4 norms before it (12.1)
    (ev,) = run(recs + [StepRecord(31, loss=7.8, grad_norm=86.0), StepRecord(32, loss=7.7, grad_norm=4.0)])
    assert (ev.rule, ev.step, ev.onset_step) == ("grad_norm_spike", 31, 31) and "of the 20 steps before" in ev.message



def test_a_jump_past_min_history_is_judged_against_the_recent_values_when_the_window_holds_a_fall():
    # a small run's fast fall (18 to 0.4 in 40 steps) fills the window with its spread: the window's median and
    # MAD, and those of their logarithms, leave a 40x jump unjudged; against the last min_history losses (median
    # 0.9, range 0.24-1.54) it is an unambiguous excursion (the records of a real CPU run, trial 14)
    fall = [18.11, 20.42, 15.01, 13.92, 12.06, 14.34, 14.87, 11.34, 10.47, 11.85, 8.79, 13.18, 8.06, 6.66, 6.59,
            6.17, 6.33, 4.46, 2.75, 2.87, 1.96, 1.71, 0.90, 0.90, 1.27, 1.00, 1.52, 0.86, 1.54, 1.53, 1.38, 1.15,
            1.01, 1.35, 0.59, 0.52, 0.47, 0.50, 0.39, 0.26, 0.24, 0.44]
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate(fall)]
    assert run(recs) == []
    (ev,) = run(recs + [StepRecord(43, loss=16.99), StepRecord(44, loss=15.58)])
    assert (ev.rule, ev.step, ev.onset_step) == ("loss_spike", 43, 43) and "18.9x the median 0.9 of the 20" in ev.message
    # a second burst of grad norms, past the window's memory of the first: judged against the norms since
    norms = [1.0 + 0.1 * (i % 5) for i in range(30)] + [40.0, 60.0, 30.0] + [1.0 + 0.1 * (i % 5) for i in range(25)]
    losses = noisy_losses(59)
    recs = [StepRecord(i + 1, loss=losses[i], grad_norm=x) for i, x in enumerate(norms + [50.0])]
    assert [(e.rule, e.step) for e in run(recs)] == [
        ("grad_norm_spike", 31), ("grad_norm_spike", 59)]

def test_grad_norm_spike_ignores_overflow_steps():
    loss = noisy_losses(164)
    recs = [StepRecord(i + 1, loss=loss[i], grad_norm=1.0 + 0.05 * (i % 5), overflow=False) for i in range(160)]
    recs.append(StepRecord(161, loss=loss[160], grad_norm=500.0, overflow=True))
    assert run(recs) == []
    # a one-batch outlier under burst_ratio (clipping absorbs it) is not an event; two high norms in a row are
    recs.append(StepRecord(162, loss=loss[161], grad_norm=5.0, overflow=False))
    recs.append(StepRecord(163, loss=loss[162], grad_norm=1.0, overflow=False))
    assert run(recs) == []
    recs.append(StepRecord(164, loss=loss[163], grad_norm=5.0, overflow=False))
    recs.append(StepRecord(165, loss=loss[163], grad_norm=4.0, overflow=False))
    (ev,) = run(recs)
    assert (ev.rule, ev.step, ev.onset_step, ev.value, ev.severity) == ("grad_norm_spike", 165, 164, 5.0, "warning")


def test_grad_norm_spike_with_the_loss_up_on_the_same_step_needs_no_confirmation():
    loss = noisy_losses(170)
    recs = [StepRecord(i + 1, loss=loss[i], grad_norm=1.0 + 0.05 * (i % 5)) for i in range(160)]
    # the update of step 160 was a surge: step 161's grad norm and loss both jump
    surge = recs + [StepRecord(161, loss=loss[160] * 1.4, grad_norm=5.0)]
    (ev,) = [e for e in run(surge) if e.rule == "grad_norm_spike"]
    assert (ev.step, ev.onset_step) == (161, 161)
    # the same grad norm with the loss where it was waits for the next step
    alone = recs + [StepRecord(161, loss=loss[160], grad_norm=5.0)]
    assert run(alone) == []
    assert run(surge[:-1] + [StepRecord(161, loss=loss[160] * 1.4, grad_norm=5.0)],
               Rules({"grad_norm_spike": {"confirm_loss_sigma": 0.0}, "loss_spike": {"enabled": False}})) == []
    assert [e.step for e in run(alone + [StepRecord(162, loss=loss[161], grad_norm=4.0)])] == [162]
    # burst_ratio (6) x its median or more is no one-batch outlier (llm.c's 2.02 among 0.25-0.31, tune/llmc_gpt2_..;
    # a torchtitan VLM fine-tune's 0.04 -> 76914, tune/torchtitan_vlm_sft_..): at once, the next step back at the
    # median
    burst = recs + [StepRecord(161, loss=loss[160], grad_norm=1100.0), StepRecord(162, loss=loss[161], grad_norm=1.0)]
    assert [(e.rule, e.step) for e in run(burst)] == [("grad_norm_spike", 161)]
    assert run(burst, Rules({"grad_norm_spike": {"burst_ratio": 0.0}})) == []


def test_a_start_up_that_never_stops_overflowing_is_a_storm_not_calibration():
    loss = noisy_losses(40)
    endless = [StepRecord(i + 1, loss=loss[i], overflow=True, loss_scale=max(2.0 ** (32 - i), 1.0)) for i in range(40)]
    (ev,) = run(endless[:30])
    # 24 overflows are calibration; the 25th starts counting and the third counted one is the storm
    assert (ev.rule, ev.step, ev.onset_step) == ("overflow_storm", 27, 25)
    assert run(endless[:24]) == []


def test_records_numbered_by_their_position_are_not_known_to_be_at_start_up():
    # the start-up halving from 2^32, by the trainer's step numbers: calibration
    startup = [StepRecord(i + 1, overflow=True, loss_scale=2.0 ** (32 - i)) for i in range(8)]
    assert run(startup) == []
    # the same records numbered by their position (a log that names no step): nothing says they are at start-up
    engine = Engine(Rules())
    events = []
    for rec in startup:
        engine.judge.by_position()
        events += engine.observe(rec)
    assert [(e.rule, e.step, e.onset_step, e.value) for e in events] == [("overflow_storm", 3, 1, 3.0)]
    # by_position marks the next record only, and that record ends calibration: the ones after it count too
    engine = Engine(Rules())
    engine.judge.by_position()
    events = engine.observe(startup[0]) + [e for rec in startup[1:] for e in engine.observe(rec)]
    assert [(e.rule, e.step) for e in events] == [("overflow_storm", 3)]


def test_overflow_at_a_loss_scale_the_dynamic_scaler_cannot_reach_fires_at_once():
    loss = noisy_losses(60)
    calib = [StepRecord(i + 1, loss=loss[i], overflow=True, loss_scale=2.0 ** (32 - i)) for i in range(10)]
    clean = [StepRecord(11 + i, loss=loss[10 + i], overflow=False, loss_scale=2.0 ** 22) for i in range(30)]
    grown = [StepRecord(41, loss=loss[40], overflow=True, loss_scale=2.0 ** 23)]  # a healthy growth, then overflow
    assert run(calib + clean + grown) == []
    stale = [StepRecord(41, loss=loss[40], overflow=True, loss_scale=2.0 ** 29)]
    (ev,) = run(calib + clean + stale)
    assert (ev.rule, ev.step, ev.onset_step, ev.value) == ("overflow_storm", 41, 41, 2.0 ** 29)


def test_a_sustained_loss_shift_too_small_for_a_spike_is_a_loss_spike_with_its_onset():
    loss = noisy_losses(140)
    shifted = [StepRecord(i + 1, loss=x + (0.3 if i >= 120 else 0.0)) for i, x in enumerate(loss)]  # +10 %, ~5 sigma
    ev = run(shifted)[0]
    assert (ev.rule, ev.onset_step) == ("loss_spike", 121) and 121 < ev.step <= 126
    assert "loss level" in ev.message
    assert run(shifted, Rules({"loss_spike": {"shift_steps": 0}})) == []


def test_a_loss_back_from_exactly_zero_is_judged_without_dividing_by_zero():
    recs = [StepRecord(i + 1, loss=0.0) for i in range(40)] + [StepRecord(41, loss=2.5)]
    events = run(recs)
    spike = [e for e in events if e.rule == "loss_spike"]
    assert [e.step for e in spike] == [41] and "inf robust sigma" in spike[0].message
    assert "loss_degenerate" in {e.rule for e in events}


def test_overflow_storm_after_calibration_only():
    loss = noisy_losses(60)
    calib = [StepRecord(i + 1, loss=loss[i], overflow=True, loss_scale=2.0 ** (32 - i)) for i in range(10)]
    clean = [StepRecord(11 + i, loss=loss[10 + i], overflow=False, loss_scale=2.0 ** 22) for i in range(30)]
    assert run(calib + clean) == []
    storm = [StepRecord(41 + 2 * i, loss=loss[40 + i], overflow=True, loss_scale=2.0 ** (21 - i)) for i in range(5)]
    (ev,) = run(calib + clean + storm)
    assert (ev.rule, ev.step, ev.onset_step, ev.value) == ("overflow_storm", 45, 41, 3.0)


def test_same_records_same_events_and_rewind_forgets_the_future():
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate(noisy_losses(80))] + [StepRecord(81, loss=20.0)]
    a, b = run(recs), run(recs)
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b] and len(a) == 1
    # after a rollback to step 60 the same spike is judged again (history after 60 dropped, cooldown reset)
    kept = EventList()
    eng = Engine(sinks=[kept])
    for r in recs:
        eng.observe(r)
    for r in recs[60:]:
        eng.observe(r)
    assert [e.step for e in kept.events] == [81, 81]


def test_a_restart_that_goes_back_over_healthy_steps_keeps_their_level():
    # an excerpt of steps 500-690 at a loss of ~0.4, then the job is restarted from a checkpoint of step 300 and
    # appended to the same log: its 1.6 at step 301 is judged against the level the abandoned steps said (none
    # of them raised anything), not against the one record since the restart (0.5: a margin under
    # excursion_min x 2 against one value)
    level = [StepRecord(500 + 10 * i, loss=0.4 * (1 + 0.1 * ((-1) ** i))) for i in range(20)]
    restart = [StepRecord(300, loss=0.5), StepRecord(301, loss=1.6)]
    assert [(e.rule, e.step) for e in run(level + restart)] == [("loss_spike", 301)]
    assert run(restart) == []
    # the first record after one of the monitor's rollbacks (a record log fed again on a resume): forgotten, as the
    # live engine was rewound there, whatever asked for the rollback
    rolled = [StepRecord(300, loss=0.5, slow_reason="rollback"), StepRecord(301, loss=1.6)]
    assert run(level + rolled) == []
    # the same records from a fresh start (the go-back is into the loss rule's warm-up, 10 steps): a new run
    assert run(level + [StepRecord(1, loss=0.5), StepRecord(2, loss=1.6)]) == []
    # another rank's line of the same step is no restart (seven ranks' step 18 of an mpirun log,
    # tests/data/reallogs/heldout9/mindaudio_deepspeech2_..): no rank's loss is judged against the others'
    assert run([StepRecord(18, loss=x) for x in (870.0, 911.5, 1010.1, 1261.9, 847.7, 1045.4, 870.5)]) == []


def test_an_excursion_after_a_start_up_burst_is_judged_against_the_values_mad_not_their_range():
    # a DeepSpeed Ulysses fine-tune (tests/data/reallogs/tune/deepspeed_ulysses_..bigyang.log, iterations 0-13):
    # a start-up burst to 20.8, a level of 7.9-8.7, then 24.7; the burst stretches the range of the 13 losses
    # before (3.56-20.8, 16.5 above their median is under 3x it), not their MAD
    ulysses = [3.5615, 13.0887, 20.7594, 9.2381, 13.7791, 9.2545, 8.1535, 8.2368, 8.1739, 7.8870, 8.7001, 7.9517,
               7.9179, 24.7211]
    events = run([StepRecord(i, loss=x) for i, x in enumerate(ulysses)])
    assert [(e.rule, e.step) for e in events] == [("loss_spike", 1), ("loss_spike", 13)]
    assert "3x the median 8.237 of the 13 steps before" in events[1].message
    # per-sample losses spread over orders of magnitude (a MindSpore R(2+1)D run's LossMonitor lines,
    # tests/data/reallogs/tune/mindspore_r2plus1d_..: 1.22 at its third record, then 1.77): their MAD leaves the
    # tail out, the MAD of their logarithms does not
    r2plus1d = [0.004272789, 0.062011678, 1.2200212, 0.20649293, 0.110879965, 0.019843677, 0.0016696296, 0.028821332,
                0.022604007, 0.050388362, 0.03981915, 1.77048, 0.46865237]
    assert run([StepRecord(6 + 10 * i, loss=x) for i, x in enumerate(r2plus1d)]) == []


def test_expected_range_is_the_control_chart_constant_d2():
    from training_monitor.detectors import expected_range
    table = {2: 1.128, 3: 1.693, 5: 2.326, 10: 3.078, 20: 3.735}  # Montgomery, appendix table VI
    assert {n: round(expected_range(n), 3) for n in table} == table


def test_a_burst_far_above_the_last_event_fires_within_the_cooldown():
    """A grad-norm event opens a 10-step cooldown; within it a new burst (the norm back down in between) of
    ``escalation`` (10) x the event's norm fires all the same, a smaller one does not; a loss spike's escalation is
    2 x (a loss is a logarithm: the heldout36 DeepSpeed fine-tune's 4.51 then 11.6 five steps later)."""
    loss = noisy_losses(50)
    norms = [1.0 + 0.05 * ((7 * i) % 5) for i in range(40)] + [50.0, 60.0, 1.0, 1.0, 400.0, 450.0, 1.0, 1.0, 600.0,
                                                                  700.0]
    recs = [StepRecord(i + 101, loss=loss[i], grad_norm=g) for i, g in enumerate(norms)]
    assert fired(recs, "grad_norm_spike") == [(141, 141), (149, 149)]  # over burst_ratio: at once
    off = Rules({"grad_norm_spike": {"escalation": 0}})
    assert [(e.step, e.value) for e in run(recs, off) if e.rule == "grad_norm_spike"] == [(141, 50.0)]
    losses = [2.0 + 0.1 * ((7 * i) % 5) for i in range(40)] + [5.0, 2.1, 2.0, 2.2, 6.0, 2.1, 2.0, 11.0, 2.1, 2.0]
    recs = [StepRecord(i + 1, loss=x) for i, x in enumerate(losses)]
    assert fired(recs, "loss_spike") == [(41, 41), (48, 48)]  # 11 >= 2 x 5; the 6.0 at 45 is not
    # a loss that keeps climbing is one excursion: no second event within the cooldown however high it goes
    climb = [StepRecord(i + 1, loss=x) for i, x in enumerate(losses[:40] + [5.0, 12.0, 30.0, 80.0])]
    assert fired(climb, "loss_spike") == [(41, 41)]


def test_a_sink_that_raises_does_not_stop_detection():
    class Broken(Sink):
        def on_event(self, event):
            raise OSError("disk full")

    eng = Engine(sinks=[Broken()])
    assert [e.rule for e in eng.observe(StepRecord(1, loss=math.inf))] == ["nan_inf"]


def test_rules_file_overrides_and_errors_name_file_line_key(tmp_path):
    good = tmp_path / "rules.yaml"
    good.write_text("loss_spike:\n  threshold: 3.5\n  actions: [alert]\nnan_inf:\n  enabled: false\n")
    rules = Rules.load(good)
    assert rules.rules["loss_spike"].params["threshold"] == 3.5
    assert rules.rules["loss_spike"].actions == ("alert",)
    assert "nan_inf" not in [d.cfg.id for d in rules.detectors()]
    assert {"loss_spike", "grad_norm_spike", "overflow_storm", "low_mfu"} <= {d.cfg.id for d in rules.detectors()}

    cases = {
        "loss_spike:\n  threshold: high\n": ":2: loss_spike.threshold: expected a finite number 0..1e+07, got 'high'",
        "loss_spike:\n  window: 10\n  treshold: 3\n": ":3: loss_spike.treshold: unknown setting",
        "lose_spike:\n  threshold: 3\n": ":1: lose_spike: unknown rule",
        "nan_inf:\n  actions: [page]\n": ":2: nan_inf.actions: expected a list of alert, rollback, skip_batches, stop",
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
    # every wrong key of a rule is named at once, one per line (not the first alone)
    bad.write_text("loss_spike:\n  sigma: 8\n  min_histroy: 30\n  threshold: -3\n")
    with pytest.raises(RulesError) as err:
        Rules.load(bad)
    assert [line.split(": unknown")[0].split(": expected")[0] for line in str(err.value).splitlines()] == [
        f"{bad}:2: loss_spike.sigma", f"{bad}:3: loss_spike.min_histroy", f"{bad}:4: loss_spike.threshold"]
    # ... and every wrong rule of the file, in its order (an unknown rule hides no other error)
    bad.write_text("nan_inff:\n  severity: critical\nloss_spike:\n  threshold: high\nstall: [1]\n")
    with pytest.raises(RulesError) as err:
        Rules.load(bad)
    assert [line.split(": ")[1] for line in str(err.value).splitlines()] == ["nan_inff", "loss_spike.threshold",
                                                                           "stall"]


def test_a_settings_file_s_rules_mapping_names_its_file_line_and_key_path(tmp_path):
    from training_monitor.config import MonitorConfig

    path = tmp_path / "monitor.yaml"
    path.write_text("monitor:\n  run: x\n  rules:\n    loss_spike:\n      threshold: -1\n")
    with pytest.raises(RulesError, match=rf"^{path}:5: monitor.rules.loss_spike.threshold: expected a finite number"):
        MonitorConfig.from_yaml(path)
    path.write_text("rules:\n  lose_spike: {threshold: 3}\n")
    with pytest.raises(RulesError, match=rf"^{path}:2: rules.lose_spike: unknown rule \(did you mean 'loss_spike'"):
        MonitorConfig.from_yaml(path)
    assert MonitorConfig.from_dict({"rules": {"loss_spike": {"threshold": 4}}}).rules == {"loss_spike": {"threshold": 4}}


def fired(recs, rule):
    return [(e.step, e.onset_step) for e in run(recs) if e.rule == rule]


def test_grad_norm_climb_before_a_spike():
    norms = [1.0 + 0.05 * (i % 7) for i in range(200)] + [2.6 + 0.05 * (i % 7) for i in range(20)]
    loss = noisy_losses(220)
    recs = [StepRecord(i + 1, loss=loss[i], grad_norm=g) for i, g in enumerate(norms)]
    # (the noisy loss is up 1.2 sigma on two steps in a row at 215-216 too: the joint clause, off here)
    hits = [e for e in run(recs, Rules({"grad_norm_spike": {"joint_ratio": 0.0}})) if e.rule == "grad_norm_spike"]
    assert hits and "climbing" in hits[0].message and hits[0].onset_step == 201


def test_a_grad_norm_at_a_level_no_healthy_run_reaches_fires_from_the_first_records():
    # openpi (JAX), Physical-Intelligence/openpi issue #814: "Step 5900: grad_norm=681325.8125, ..." to 7500,
    # logged every 100 steps; the norm is ~1e6 from the first line, so no excursion from its median
    norms = [681325.8125, 846482.3750, 549847.8750, 775058.3750, 897108.3125, 968878.0625, 725348.6875,
             1168754.7500, 971743.1875, 880253.2500, 900671.1250, 978040.0625, 1013011.1250, 1019747.5625,
             1052039.1250, 1104884.8750, 1133271.8750]
    recs = [StepRecord(5900 + 100 * i, loss=3e8, grad_norm=g) for i, g in enumerate(norms)]
    assert fired(recs, "grad_norm_spike") == [(7300, 7100)]  # three records in a row at or over 1e6
    # BLOOM tr8-104B's struggling iterations (tune/bigscience_tr8_104b_gradnorm_spike_11447 and _spike_7010):
    # 1e4-3e5 is under the level; nor does a healthy run's norm in the first records fire
    big = [StepRecord(11400 + 10 * i, loss=6.5, grad_norm=g) for i, g in enumerate((13000.0, 98300.0, 263000.0))]
    assert fired(big, "grad_norm_spike") == []
    off = Rules({"grad_norm_spike": {"level": 0.0}})
    assert [e for e in run(recs, off) if e.rule == "grad_norm_spike"] == []


def test_a_grad_norm_compounding_record_after_record_fires_whatever_its_level():
    # the Hugging Face Trainer run of ironjr/grokfast issue #9: the norm x1.5 per log (3.8e12 -> 1.4e14, then
    # inf), the loss flat at 11.3; the same growth at an ordinary level fires at its 8th rise in a row
    norms = [3789384056832.0, 5675928780800.0, 8501688532992.0, 12734252974080.0, 19073997996032.0,
             28569986138112.0, 42793548382208.0, 64098310029312.0, 96009648603136.0, 143808037650432.0]
    # at the level from the first record; the growth's 8th rise (9.6e13, over 10x that event's norm) is the same
    # excursion (onset 1), within the cooldown: no second event
    assert fired([StepRecord(i + 1, loss=11.3, grad_norm=g) for i, g in enumerate(norms)],
                 "grad_norm_spike") == [(3, 1)]
    low = [StepRecord(i + 1, loss=11.3, grad_norm=g / 1e12) for i, g in enumerate(norms)]
    assert fired(low, "grad_norm_spike") == [(9, 1)]
    assert fired(low[:8], "grad_norm_spike") == []
    # a warm-up's rising norm that does not compound (0.5 -> 3 over 30 logs, each up ~6 %) is not growth
    warm = [StepRecord(i + 1, loss=3.0, grad_norm=0.5 * 1.064 ** i) for i in range(30)]
    assert fired(warm, "grad_norm_spike") == []


def test_grad_norm_and_loss_up_together_on_two_steps_is_a_damaging_update():
    loss = noisy_losses(170)
    norms = [1.0 + 0.05 * (i % 5) for i in range(170)]
    for i in (160, 161):  # steps 161-162: the norm 1.8x, the loss 6 % up (about 3 robust sigma)
        norms[i], loss[i] = 1.8, loss[i] * 1.06
    recs = [StepRecord(i + 1, loss=x, grad_norm=g) for i, (x, g) in enumerate(zip(loss, norms))]
    assert [(e.rule, e.step, e.onset_step) for e in run(recs)] == [("grad_norm_spike", 162, 161)]
    one = recs[:161] + [StepRecord(162, loss=loss[161] / 1.06, grad_norm=1.8)] + recs[162:]
    assert run(one) == []  # one step up together, the next only in the norm: noise


def test_loss_scale_collapse_after_calibration_only():
    loss = noisy_losses(200)
    calib = [StepRecord(i + 1, loss=loss[i], overflow=True, loss_scale=2.0 ** (32 - i)) for i in range(12)]
    steady = [StepRecord(13 + i, loss=loss[12 + i], overflow=(i % 40 == 39), loss_scale=2.0 ** 20) for i in range(80)]
    assert fired(calib + steady, "loss_scale_collapse") == []
    fall = [StepRecord(93 + i, loss=loss[92 + i], overflow=True, loss_scale=2.0 ** (19 - 2 * i)) for i in range(10)]
    assert fired(calib + steady + fall, "loss_scale_collapse")[0] == (97, 93)  # 9 halvings by step 97
    bf16 = [StepRecord(i + 1, loss=loss[i], overflow=False, loss_scale=1.0) for i in range(100)]
    assert fired(bf16, "loss_scale_collapse") == []


def test_loss_zero_or_frozen_is_degenerate():
    loss = noisy_losses(60)
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate(loss[:30] + [0.0])], "loss_degenerate") == [(31, 31)]
    frozen = loss[:30] + [2.5] * 20
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate(frozen)], "loss_degenerate") == [(50, 31)]
    # a rule without a warm-up judges a log's step 0 (Semantic-Segmentation-Suite issue #175, the corpus file
    # custom_semseg_suite_current_loss_exactly_0_from_count_20_175.log: `Epoch = 0 Count = 20 Current_Loss = 0.0000`)
    assert fired([StepRecord(s, loss=0.0) for s in range(4)], "loss_degenerate") == [(0, 0)]


# A log printing every N steps shows a frozen loss in a few records: Caffe's net output `loss = 6.90776` (ln 1000,
# chance over 1000 classes) at iterations 20-80 (jixing0415/caffe-mobilenet-v3 issue #1); ChatGLM-Tuning's
# `{'loss': 0.0001, ..}` four times after 1.141 (mymusise/ChatGLM-Tuning issue #271, the corpus file
# chatglm_tuning_loss_0001_flat_epoch50_300_271.log), collapsed to the print's 4 decimals. A coarse value
# repeated (a healthy loss printed to 4 decimals, converging slowly), or a precise one in a log that repeated
# values before, is no event.
def test_a_precise_or_collapsed_loss_repeated_over_a_few_records_is_degenerate(tmp_path):
    caffe = [StepRecord(0, loss=6.91161)] + [StepRecord(s, loss=6.90776) for s in (20, 40, 60, 80)]
    assert fired(caffe, "loss_degenerate") == [(60, 20)]  # three records of a precise value (two prints 20 steps
    # apart are not 20 steps seen)
    # a 2-digit loss printed every 200 or 1000 steps repeats by chance (DeepLabCut, tests/data/reallogs/heldout19/)
    sparse = [0.0064, 0.0058, 0.0058, 0.0053, 0.0053, 0.0054, 0.0049, 0.0026, 0.0026, 0.0026, 0.0026]
    assert fired([StepRecord(7400 + 200 * i, loss=x) for i, x in enumerate(sparse)], "loss_degenerate") == []
    # a precise value over frozen_steps steps, although one repeated before: Keras' epoch loss 2.3029 (tests/data/
    # reallogs/heldout14/keras_fractalnet_..)
    keras = [2.303, 2.303, 2.3029, 2.3029, 2.3029, 2.3029, 2.3028]
    assert fired([StepRecord(50000 * (i + 1), loss=x) for i, x in enumerate(keras)], "loss_degenerate")[0] == (
        250000, 150000)
    by_record = [StepRecord(i, loss=r.loss) for i, r in enumerate(caffe)]  # the same values a step apart
    assert fired(by_record, "loss_degenerate") == [(3, 1)]
    assert fired(by_record[:3], "loss_degenerate") == []  # two records are not enough
    chatglm = [StepRecord(i + 1, loss=x) for i, x in enumerate([1.141, 0.0003, 0.0001, 0.0001, 0.0001, 0.0001])]
    hits = [e for e in run(chatglm) if e.rule == "loss_degenerate"]
    assert [(e.step, e.onset_step) for e in hits] == [(5, 3)] and "highest loss 1.141" in hits[0].message
    coarse = [StepRecord(i + 1, loss=x) for i, x in enumerate([0.0131, 0.0125, 0.0123, 0.0123, 0.0123, 0.0121])]
    assert fired(coarse, "loss_degenerate") == []
    # at the print's floor with no higher loss in the log: mmseg's `loss: 0.0001` six times (open-mmlab/
    # mmsegmentation issue #2242, tests/data/reallogs/tune/mmseg_segformer_..); DeepLabCut's `0.0020` three times
    # after 0.0021 is 20 units of the print's last place (tests/data/reallogs/tune/deeplabcut_resnet_..)
    floor = [StepRecord(3900 + 50 * i, loss=0.0001) for i in range(6)]
    assert fired(floor, "loss_degenerate")[0] == (4000, 3900)
    assert fired([StepRecord(61000 + 1000 * i, loss=x) for i, x in enumerate([0.0021, 0.002, 0.002, 0.002])],
                 "loss_degenerate") == []
    assert [decimals(x) for x in (0.0027, 2.3e-05, 0.002, 2.0, math.nan)] == [4, 6, 3, 0, 0]
    # a zero right after a value at the print's floor is its rounding (CompressAI's `cur_mse: 0.01` then `0.00`,
    # tests/data/reallogs/tune/compressai_..): the floor's test, three records, not at once; after any other
    # value a zero is exact (Hugging Face's `'loss': 0.0` after 1.9)
    rounded = [StepRecord(1500 + 10 * i, loss=x) for i, x in enumerate([0.01, 0.0, 0.0])]
    assert fired(rounded, "loss_degenerate") == []
    assert fired(rounded + [StepRecord(1530, loss=0.0)], "loss_degenerate") == [(1530, 1510)]
    assert fired([StepRecord(1, loss=1.9), StepRecord(2, loss=0.0)], "loss_degenerate") == [(2, 2)]
    assert fired([StepRecord(1, loss=0.02), StepRecord(2, loss=0.0)], "loss_degenerate") == [(2, 2)]  # 2 units
    # a float32 loss printed in full, moving in its last digits: DINO's 11.0903 (ln 65536) over epochs 201-205
    # (facebookresearch/dino issue #246, tests/data/reallogs/tune/dino_epochs_201_..)
    dino = [11.090327262878418, 11.090327262878418, 11.090328216552734, 11.090328216552734, 11.090330123901367]
    assert fired([StepRecord(201 + i, loss=x) for i, x in enumerate(dino)], "loss_degenerate") == [(203, 201)]
    # a log whose values repeat by chance at its resolution (a loss printed every step to 4 decimals, converging
    # slowly: 2.0213 twice, later 2.0212 three times) shows it before: only frozen_steps in a row are degenerate
    chance = [2.0219, 2.0213, 2.0213, 2.0215, 2.0211, 2.0212, 2.0212, 2.0212, 2.0214]
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate(chance)], "loss_degenerate") == []
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate(chance[3:])], "loss_degenerate") == [(4, 2)]
    # a precise value moving by one unit of its last printed place is the same value: a Keras classifier's loss
    # at ln 100, chance over its 100 classes (pastebin cHJjj9Lt, tests/data/reallogs/tune/keras_top5_..); moving
    # by more, it is a loss still converging
    top5 = [4.7011, 4.6061, 4.6064, 4.6061, 4.6061, 4.606]
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate(top5)], "loss_degenerate") == [(6, 4)]
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate([4.4408, 4.4406, 4.4409, 4.4405, 4.4407])],
                 "loss_degenerate") == []
    assert significant_digits(6.90776) == 6 and significant_digits(1e-05) == 1 and significant_digits(100.0) == 0
    # a bf16 loss repeats by rounding: tinygrad's `11.8750 loss` at warm-up (tinygrad/tinygrad PR #13803)
    assert significant_digits(11.875) == 0
    assert fired([StepRecord(i + 1, loss=11.875) for i in range(5)], "loss_degenerate") == []
    path = tmp_path / "train.log"  # ChatGLM-Tuning's line printed by each of four processes: copies, not four steps
    path.write_text("{'loss': 0.0001, 'learning_rate': 3.366666666666667e-05, 'epoch': 200.0}\n" * 4, encoding="utf-8")
    res = replay_file(str(path))
    assert res.steps == 1 and res.skipped["duplicate step"] == 3 and res.events == []


# A loss under 1e-6 in three records in a row has collapsed to zero whatever its values: a few-shot fine-tune's
# PaddleNLP Trainer `loss: 3.3e-07`, `4.9e-07`, `4e-07` (tests/data/reallogs/tune/paddlenlp_trainer_fewclue_..),
# an excerpt that starts collapsed (`Loss: 0.000000479986852`, tests/data/reallogs/tune/dope_train_epoch_..)
def test_a_loss_under_a_millionth_in_three_records_has_collapsed_to_zero():
    few_shot = [8.08e-06, 2.494e-05, 3.47e-06, 2.51e-06, 3.3e-07, 4.9e-07, 4e-07, 2.3e-07]
    assert fired([StepRecord(100 + 10 * i, loss=x) for i, x in enumerate(few_shot)], "loss_degenerate")[0] == (
        160, 140)
    dope = [4.79986852e-07, 1.05923948e-06, 3.6008135e-08, 3.0287978e-08, 2.00769165e-07]
    assert fired([StepRecord(6400 + 3200 * i, loss=x) for i, x in enumerate(dope)], "loss_degenerate")[0] == (
        19200, 12800)
    # two such records, or small values that are not that small, are no event; nor with the test off
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate([0.5, 3e-07, 4e-07, 2e-06, 5e-07])],
                 "loss_degenerate") == []
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate([2.5e-06, 3.1e-06, 2.2e-06, 4.4e-06])],
                 "loss_degenerate") == []
    off = Rules({"loss_degenerate": {"tiny_below": 0}})
    assert not [e for e in run([StepRecord(i + 1, loss=x) for i, x in enumerate(few_shot)], off)
                if e.rule == "loss_degenerate"]


def test_early_plateau_but_not_a_learning_run():
    learning = [5.0 * math.exp(-i / 800) + 0.02 * ((-1) ** i) for i in range(1500)]
    assert fired([StepRecord(i + 1, loss=x) for i, x in enumerate(learning)], "loss_plateau") == []
    flat = [4.0 + 0.02 * ((-1) ** i) for i in range(1200)]
    assert fired([StepRecord(i + 1, loss=x, grad_norm=None) for i, x in enumerate(flat)], "loss_plateau")[0] == (1100, 101)


def steady(n, step_time=0.5, wait=0.001):
    return [StepRecord(i + 1, loss=x, tokens=4096, step_time_s=step_time + 0.01 * (i % 3), data_wait_s=wait)
            for i, x in enumerate(noisy_losses(n))]


def test_throughput_drop_when_the_steps_wait_for_data():
    recs = steady(260)
    recs[140].data_wait_s = 5.0  # one slow step: not a drop
    assert fired(recs, "throughput_drop") == []
    for r in recs[150:200]:
        r.data_wait_s = 0.5  # the pipeline is 2x slower for steps 151-200: the period doubles
    (ev,) = [e for e in run(recs) if e.rule == "throughput_drop"]
    assert (ev.step, ev.onset_step) == (156, 151) and "waiting for data" in ev.message  # 6 of the last 10 low
    for r in recs[150:200]:
        r.slow_reason = "checkpoint"  # slow for a reason the monitor knows: not judged
    assert fired(recs, "throughput_drop") == []
    fast_start = steady(260)
    for r in fast_start[5:40]:
        r.step_time_s /= 3  # the first steps after compiling run on prefetched batches: not the normal pace
    assert fired(fast_start, "throughput_drop") == []
    # a tutorial's millisecond steps, their data wait from 0.1 to 1 ms (a new user's MindSpore run): 10 steps that
    # lose 1.3 ms in all, mostly waiting, lose under excursion_seconds: no drop
    tiny = [StepRecord(i + 1, loss=x, tokens=16, step_time_s=0.0004, data_wait_s=0.001 if 150 <= i < 200 else 0.0001)
            for i, x in enumerate(noisy_losses(260))]
    assert fired(tiny, "throughput_drop") == []
    slow = [StepRecord(r.step, loss=r.loss, tokens=16, step_time_s=0.04, data_wait_s=r.data_wait_s * 100) for r in tiny]
    assert [step for step, _ in fired(slow, "throughput_drop")] == [155]  # the same at 100x: 130 ms lost


def test_a_rollback_keeps_the_throughput_reference():
    # steps 1-200 steady, a rollback at 200 to step 90 (fewer steps than min_history, 100, before it), then steps
    # 91-110 again with the pipeline 2x slower from 95: the steps after 90 measured the same machine and
    # pipeline, so the drop is judged against them, not taken for a short excerpt's
    recs = steady(200)
    again = [StepRecord(s, loss=3.0, tokens=4096, step_time_s=0.5, data_wait_s=0.5 if s >= 95 else 0.001)
             for s in range(91, 111)]
    kept = EventList()
    eng = Engine(Rules.load(), [kept])
    for r in recs:
        eng.observe(r)
    eng.rewind(90)
    for r in again:
        eng.observe(r)
    drops = [(e.step, e.onset_step) for e in kept.events if e.rule == "throughput_drop"]
    assert drops == [(100, 95)]
    # a record log's replay goes back by the steps alone (the live rewind is not in it): the same decision
    assert [(e.step, e.onset_step) for e in run(recs + again) if e.rule == "throughput_drop"] == drops


def test_a_finer_count_starts_the_throughput_series_again():
    # samples/s for 250 steps, then the records count tokens too (tokens/s, a finer count): the reference
    # starts again on tokens/s (the samples/s kept would hold it at their level), so a 2x slower pipeline from
    # step 400 is a drop against the tokens' own level
    recs = [StepRecord(r.step, loss=r.loss, samples=8, step_time_s=r.step_time_s, data_wait_s=r.data_wait_s)
            for r in steady(250)] + steady(450)[250:]
    for r in recs[399:430]:
        r.data_wait_s = 0.5
    assert fired(recs, "throughput_drop") == [(405, 400)]


def test_a_printed_rate_of_zero_is_a_count_of_zero_not_a_coarser_count():
    # samples/s, then a rate printed as 0.0 (under its last digit: 43 s a batch of one image): samples 0 is the
    # samples series' lowest rate, judged as one (not a steps/s record, coarser than the series, not judged)
    recs = [StepRecord(0, loss=24.9, samples=1, step_time_s=0.48)] + [
        StepRecord(s, loss=20.0, samples=0, step_time_s=43.0) for s in (100, 200, 300)]
    (ev,) = [e for e in run(recs) if e.rule == "throughput_drop"]
    assert (ev.step, ev.onset_step) == (200, 100) and "far below" in ev.message


def test_an_input_bound_run_is_reported_at_any_history():
    # every step after the warm-up waits 2 s for data and computes 0.5 s: no drop, the pipeline sets the pace
    bound = steady(40, wait=2.0)
    assert fired(bound, "throughput_drop") == [(20, 6)]  # 15 records in a row waited 30 s (bound_seconds)
    (ev,) = [e for e in run(bound) if e.rule == "throughput_drop"]
    assert ev.message.startswith("input-bound: each of the 15 records since step 6")
    # the streak going on is the same condition: one event, not one each cooldown (100 steps); once it is
    # broken (3 steps fed at once), a new streak is a new event
    long = steady(400, wait=2.0)
    assert fired(long, "throughput_drop") == [(20, 6)]
    for r in long[250:253]:
        r.data_wait_s = 0.001
    assert fired(long, "throughput_drop") == [(20, 6), (268, 254)]
    # the same time spent in a callback listed after the monitor (a new user's 0.2 s sleep): named so, not as
    # the data pipeline's
    for r in bound:
        r.callbacks_s, r.data_wait_s = 1.9, 0.1
    (ev,) = [e for e in run(bound) if e.rule == "throughput_drop"]
    assert ev.message.startswith("callback-bound: each of the 15 records since step 6") and \
        "28.5 s of it in the callbacks listed after the monitor" in ev.message
    assert fired(steady(40, step_time=2.2, wait=2.0), "throughput_drop") == []  # waiting under half of each step
    start = steady(40)
    for r in start[:5]:
        r.data_wait_s = 30.0  # the loader's workers starting: in the warm-up
    assert fired(start, "throughput_drop") == []
    broken = steady(40, wait=2.0)
    for r in broken[7::2]:
        r.data_wait_s = 0.001  # every other step fed at once: no streak of bound_steps
    assert fired(broken, "throughput_drop") == []
    # a log printing every 10th step (or a sink of 10 steps): 3 lines of 6 s waits in 8 s steps, 3 x 60 s
    for sink in (1, 10):
        lines = [StepRecord(s, loss=3.0 + s / 100, tokens=4096, step_time_s=2.0, data_wait_s=6.0, steps=sink)
                 for s in (10, 20, 30)]
        assert fired(lines, "throughput_drop") == [(30, 10)]
        assert fired(lines[:2], "throughput_drop") == []  # 2 lines: fewer than bound_steps


def test_a_slower_compute_is_a_drop_only_when_it_lasts():
    # a busy shared host stretches the step's compute for a while; the data wait stays where it was
    busy = steady(250)
    for r in busy[150:220]:
        r.step_time_s *= 3
    assert fired(busy, "throughput_drop") == []  # 70 slow steps of about 1.5 s: under min_seconds (120 s)
    slow = steady(600, step_time=5.0)
    for r in slow[150:]:
        r.step_time_s *= 2  # 10 s steps: the slow stretch reaches 120 s at its 12th step
    assert fired(slow, "throughput_drop") == [(162, 151), (263, 151)]  # and again after the cooldown
    # a short log printing every 10th step (modded-nanogpt's lines, openai/parameter-golf PR #276): 0.52 s steps,
    # then 8 s from step 390; each line times the 10 steps since the one before, so the second slow line is 160 s
    sparse = [StepRecord(s, loss=3.0, step_time_s=0.52 if s < 390 else 8.0) for s in range(10, 480, 10)]
    assert fired(sparse, "throughput_drop") == [(400, 390)]
    one = [StepRecord(s, loss=3.0, step_time_s=0.52 if s != 390 else 40.0) for s in range(10, 480, 10)]
    assert fired(one, "throughput_drop") == []  # one slow line of 400 s by that count: it may time its own step


def test_records_without_tokens_are_judged_in_samples_then_steps_per_second():
    for extra, unit in (({"samples": 64}, "samples"), ({}, "steps")):
        recs = [StepRecord(r.step, loss=r.loss, step_time_s=r.step_time_s, data_wait_s=r.data_wait_s, **extra)
                for r in steady(260)]
        for r in recs[150:200]:
            r.data_wait_s = 0.5  # the pipeline is 2x slower for steps 151-200
        (ev,) = [e for e in run(recs) if e.rule == "throughput_drop"]
        assert (ev.step, ev.onset_step) == (156, 151) and ev.message.startswith(f"{unit}_per_second")
    # one series per run: from the first record with tokens on, records without them are not judged
    mixed = steady(400)
    for r in mixed[:100]:
        r.tokens = None
    for r in mixed[300:350]:
        r.data_wait_s = 0.5
    assert fired(mixed, "throughput_drop") == [(306, 301)]
    for r in mixed[300:350]:
        r.tokens = None
    assert fired(mixed, "throughput_drop") == []


def excerpt(start, n=12, step_time=2.0, wait=0.05, steps=1):
    return [StepRecord(start + i, loss=3.0, step_time_s=step_time + 0.1 * (i % 3), data_wait_s=wait, steps=steps)
            for i in range(n)]


def test_a_short_excerpt_reports_only_an_unambiguous_drop():
    # one step 100x slower, all of it waiting for data, in an excerpt from step 1000: at once
    recs = excerpt(1000)
    recs[8].data_wait_s = 210.0
    (ev,) = [e for e in run(recs) if e.rule == "throughput_drop"]
    assert (ev.step, ev.onset_step) == (1008, 1008) and "waiting for data" in ev.message
    assert run(recs, Rules({"throughput_drop": {"excursion_ratio": 0.0}})) == []
    # the same at a run's own start, for less than min_seconds (120 s): its first steps run on prefetched
    # batches, the pipeline's pace comes later
    start = excerpt(1)
    start[8].data_wait_s = 100.0
    assert fired(start, "throughput_drop") == []
    start[8].data_wait_s = 210.0  # a step lasting min_seconds is one, whatever it waited for
    assert fired(start, "throughput_drop") == [(9, 9)]
    # a step 10x slower with no more data wait (a checkpoint saved, an evaluation, a profiler dump inside it)
    save = excerpt(1000)
    save[8].step_time_s = 20.0
    assert fired(save, "throughput_drop") == []
    # a 0.1-ms step (the hot-path benchmark's) whose data wait jitters 2 ms -> 20 ms: 10x slower, losing 18 ms
    jitter = excerpt(1000, step_time=0.0001, wait=0.002)
    for r in jitter:
        r.step_time_s = 0.0001
    jitter[8].data_wait_s = 0.02
    assert fired(jitter, "throughput_drop") == []
    # 2.5x slower, all of it waiting for data: not several times slower
    mild = excerpt(1000)
    mild[8].data_wait_s = 3.0
    assert fired(mild, "throughput_drop") == []
    # epoch lines (each for 14 steps; epochs 1-3 are the warm-up's, learned, not judged): epoch 10 is 6.6x slower
    # and lasts 22 minutes (MindSpore's transfer-learning tutorial); one step of it (96 s) would not
    epochs = excerpt(1, n=4, step_time=14.4, wait=0.0, steps=14)
    epochs[3].step, epochs[3].step_time_s = 10, 95.6
    assert fired(epochs, "throughput_drop") == [(10, 10)]
    for r in epochs:
        r.steps = 1
    assert fired(epochs, "throughput_drop") == []


def test_low_mfu_only_when_known_and_sustained():
    loss = noisy_losses(200)
    assert fired([StepRecord(i + 1, loss=loss[i]) for i in range(200)], "low_mfu") == []
    recs = [StepRecord(i + 1, loss=loss[i], mfu=0.45 if i < 100 else 0.12) for i in range(200)]
    assert fired(recs, "low_mfu") == [(150, 101)]
    # the message keeps a small MFU's digits (a hobby run's printed `mfu 0.01%` is not 0.0%)
    (ev,) = [e for e in run([StepRecord(i + 1, loss=loss[i], mfu=0.0001) for i in range(200)]) if e.rule == "low_mfu"]
    assert ev.message == "MFU 0.01% below the floor 20%"


def test_window_matches_a_fresh_sort_through_adds_and_rewinds():
    # the detectors' window keeps its values sorted as they go (eager) or sorts them when read (lazy); its
    # median and sigma are those of the window's values sorted afresh, through adds, evictions and rewinds,
    # with ties and -0.0
    import random

    from training_monitor.detectors import Window

    for lazy in (False, True):
        check_window(Window(7, lazy=lazy), random.Random(0))


def check_window(window, rng):
    from training_monitor.detectors import median

    items, step = [], 0
    for _ in range(3000):
        if rng.random() < 0.05:
            step = max(0, step - rng.randint(0, 5))
            window.rewind(step)
            items = [(s, v) for s, v in items if s <= step]
        else:
            step += 1
            x = rng.choice([rng.gauss(3.0, 1.0), 0.0, -0.0, 2.0, 1e300])
            window.add(step, x)
            items = (items + [(step, x)])[-7:]
        assert window.pairs() == items and len(window) == len(items)
        if items:
            values = sorted(v for _, v in items)
            m = median(values)
            assert window.sorted_values() == values
            assert window.median() == m
            assert window.sigma(m) == 1.4826 * median(sorted(abs(v - m) for v in values))
            if values[0] > 0:  # the same on the values' logarithms
                logs = [math.log(v) for v in values]
                ml = median(logs)
                assert window.log_median() == ml
                assert window.sigma(ml, True) == 1.4826 * median(sorted(abs(v - ml) for v in logs))

# Short excerpts and runs that start late, with the numbers of the public excerpts in /work/shared/samples
# (Megatron-DeepSpeed tr1-13B, a Hugging Face fine-tune, MindFormers Llama 2 13B and GLM-6B).
MEGATRON_DS = {29020: (2.775923, 32768.0), 29030: (2.772822, 32768.0), 29040: (2.768131, 65536.0),
               29050: (7.343709, 8192.0), 29060: (8.715872, 4096.0), 29070: (7.654131, 4096.0),
               29080: (7.192470, 4096.0), 29090: (6.849044, 4096.0)}


def test_an_unambiguous_loss_excursion_in_a_short_excerpt_fires():
    recs = [StepRecord(s, loss=x, loss_scale=ls, steps=10) for s, (x, ls) in MEGATRON_DS.items()]
    events = run(recs)
    spike = [e for e in events if e.rule == "loss_spike"][0]
    assert (spike.step, spike.onset_step) == (29050, 29050) and "2.65x the median" in spike.message
    # the lines print no overflow flag: the scale's fall 65536 -> 8192 is 3 overflows, a storm
    assert [(e.step, e.onset_step) for e in events if e.rule == "overflow_storm"] == [(29050, 29050)]
    assert run(recs, Rules({"loss_spike": {"excursion_ratio": 0.0}, "overflow_storm": {"enabled": False}})) == []


def test_a_loss_jump_after_a_single_logged_value_fires_when_it_is_large():
    # BigScience tr8-104B: 6.44 -> 11.42 between two logged iterations (the grad norm only 2.2x)
    recs = [StepRecord(7000, loss=6.444662, grad_norm=98258.265), StepRecord(7010, loss=11.42026, grad_norm=219645.978)]
    assert [(e.rule, e.step) for e in run(recs)] == [("loss_spike", 7010)]
    # a fine-tune's 0.64 -> 1.02 (1.6x, but 0.4 up): its noise, not an event
    assert run([StepRecord(5030, loss=0.6427), StepRecord(5040, loss=1.0184)]) == []


def test_a_sustained_rise_over_a_few_logged_intervals_fires_at_the_third_rise():
    # BigScience tr8-104B (train/tr8-104B-wide/chronicles.md, iterations logged every 10): 6.37 -> 10.24, no
    # single jump unambiguous (9.12 is 1.38x the median before it), but three rises in a row to 1.43x
    tr8 = {6900: 6.365808, 6910: 6.598378, 6920: 7.314456, 6930: 9.121927, 6940: 10.23865}
    recs = [StepRecord(s, loss=x, steps=10) for s, x in tr8.items()]
    (ev,) = [e for e in run(recs) if e.rule == "loss_spike"]
    assert (ev.step, ev.onset_step, ev.value) == (6930, 6910, 9.121927) and "rose at each of the last 3" in ev.message
    assert run(recs, Rules({"loss_spike": {"rise_steps": 0}})) == []
    # 1.43x is under a ratio of 1.5: the rise fires one record later, 6.60 -> 10.24 (1.55x)
    assert [(e.step, e.onset_step) for e in run(recs, Rules({"loss_spike": {"rise_ratio": 1.5}}))] == [(6940, 6920)]
    # one fall among the rises: no sustained rise
    assert run([StepRecord(s, loss=x) for s, x in {**tr8, 6920: 6.5}.items()]) == []
    # the warm-up's first steps are judged so too (as by the excursion test): a loss rising 1.3x from a fresh
    # run's first records is no start-up (MindSpeed's SFT baseline on NPUs, tests/data/reallogs/tune/mindspeed_..:
    # 2.51, 4.02, 6.66, 7.40 at iterations 1-4)
    fresh = [StepRecord(i + 1, loss=x) for i, x in enumerate(tr8.values())]
    assert [(e.rule, e.step, e.onset_step) for e in run(fresh)] == [("loss_spike", 4, 2)]
    sft = [StepRecord(i + 1, loss=x) for i, x in enumerate((2.5055, 4.0182, 6.6560, 7.3980))]
    assert [(e.rule, e.step, e.onset_step) for e in run(sft)] == [("loss_spike", 4, 2)]
    # a rise from a dip of a noisy per-batch loss that stays within its earlier values (MindSpore's linear-fit
    # tutorial with LossMonitor, a healthy run): no event
    tutorial = (151.55, 56.28, 10.04, 25.18, 48.37, 131.71, 85.23, 16.57, 9.92, 33.57, 50.57, 44.46, 10.49, 2.876, 18.04,
                25.55, 29.03)
    assert run([StepRecord(i + 1, loss=x) for i, x in enumerate(tutorial)]) == []
    # nor a rise to a new high by less than the range of the losses before it (a new user's healthy MSE regression,
    # batch 16, per-batch losses: 19.4 -> 36.8 is 2.4 over the earlier high, their range 20)
    noisy = (34.4, 20.6, 20.1, 30.4, 21.3, 14.4, 30.9, 19.4, 28.4, 29.4, 36.8)
    assert run([StepRecord(i + 1, loss=x) for i, x in enumerate(noisy)]) == []
    assert [e.step for e in run([StepRecord(i + 1, loss=x) for i, x in enumerate(noisy[:-1] + (56.0,))])] == [11]
    # a history long enough for the robust tests: they judge it, against the measured noise
    long = [StepRecord(6700 + 10 * i, loss=6.4 + 0.1 * (i % 3)) for i in range(20)]
    assert [e.rule for e in run(long + recs[1:])] == ["loss_spike"]


def test_noisy_per_step_losses_rising_three_times_by_less_than_excursion_min_raise_nothing():
    # DrSleep/tensorflow-deeplab-lfov issue #5 (a DeepLab run, one line per step): 0.712 -> 1.530 in three rises
    # is this loop's noise (it goes on 1.014, 0.936, 1.616, 1.535, 3.276, 2.440, ...)
    losses = [0.712, 1.022, 1.330, 1.530, 1.014, 0.936, 1.616, 1.535, 3.276, 2.440, 1.541, 1.519, 1.740, 1.382]
    assert run([StepRecord(13104 + i, loss=x) for i, x in enumerate(losses)]) == []


def test_healthy_short_excerpts_raise_nothing_even_past_the_warm_up():
    hf = [0.9225, 1.0654, 0.7203, 0.6427, 1.0184, 1.0611, 1.3879, 0.9321]
    assert run([StepRecord(5000 + 10 * i, loss=x) for i, x in enumerate(hf)]) == []
    llama = [(10.649, 1.31049), (10.633, 1.508834), (9.673, 10.579812), (9.287, 21.932272), (8.867, 16.986555)]
    assert run([StepRecord(17061 + i, loss=x, grad_norm=g, overflow=False, loss_scale=1.0)
                for i, (x, g) in enumerate(llama)]) == []


def test_a_grad_norm_up_by_orders_of_magnitude_in_a_short_excerpt_fires_at_once():
    norms = [0.24, 0.25, 0.23, 0.26, 1.9, 15.0, 120.0, 960.0]
    recs = [StepRecord(5001 + i, loss=2.5, grad_norm=g) for i, g in enumerate(norms)]
    (ev,) = [e for e in run(recs) if e.rule == "grad_norm_spike"]
    assert (ev.step, ev.onset_step, ev.value) == (5006, 5005, 15.0)  # 60x the median; the climb began at 5005


def test_overflows_at_the_start_of_a_log_that_begins_late_are_not_calibration():
    late = [StepRecord(17060 + i, loss=2.0, overflow=True, loss_scale=2.0 ** (16 - i)) for i in range(3)]
    assert [(e.rule, e.step, e.onset_step) for e in run(late)] == [("overflow_storm", 17062, 17060)]
    fresh = [StepRecord(1 + i, loss=2.0, overflow=True, loss_scale=2.0 ** (32 - i)) for i in range(3)]
    assert run(fresh) == []  # a fresh run's first steps: calibration


def test_a_start_up_fall_below_the_lowest_calibration_scale_is_a_collapse():
    # apex amp O1 (NVIDIA/apex issue #834): 17 step-less overflows "reducing loss scale to 32768.0" ... "0.5",
    # read as steps 1-17; calibration falls from 2^16 to no lower than 1, and an overflow at the floor (1, step
    # 16) is no calibration: the scaler at its minimum cannot answer it
    recs = [StepRecord(i + 1, overflow=True, loss_scale=32768.0 / 2 ** i) for i in range(17)]
    assert fired(recs, "loss_scale_collapse") == [(16, 16)]
    assert run(recs[:15]) == []  # down to 2 it may be calibration
    assert fired(recs, "overflow_storm") == []  # one overflow counted so far
    assert run(recs, Rules({"loss_scale_collapse": {"calibration_to": 0.25, "floor": 0.25}})) == []


def test_start_up_overflows_at_a_low_first_scale_are_no_calibration():
    # accelerate + DeepSpeed (fudan-generative-vision/hallo issue #152): the bar at 10/2000, then "Attempted
    # loss scale: 32, reducing to 16", 16 -> 8, 8 -> 4 at steps 11-13: no fall from an initial scale
    recs = [StepRecord(10, loss=math.nan)] + [StepRecord(11 + i, overflow=True, loss_scale=32.0 / 2 ** i)
                                              for i in range(3)]
    assert fired(recs, "overflow_storm") == [(13, 11)]
    # DeepSpeed ZeRO-2's start-up (shared sample deepspeed_zero2_overflow_storm_01): 2^32 -> 2^24 is calibration
    fresh = [StepRecord(1 + i, overflow=True, loss_scale=2.0 ** (32 - i)) for i in range(8)]
    assert run(fresh) == []
    lower = Rules({"overflow_storm": {"calibration_from": 32.0}})
    assert [e.rule for e in run(recs, lower)] == ["nan_inf"]  # from a first scale of 32 it is calibration
    # a scaler at its minimum from its first record (huggingface/transformers issue #14531: "Attempted loss scale:
    # 1, reducing to 1" on every step the excerpt shows, bar 98-101/24128): no calibration, a collapse
    at_min = [StepRecord(1 + i, overflow=True, loss_scale=1.0, loss_scale_next=1.0) for i in range(3)]
    assert fired(at_min, "loss_scale_collapse") == [(1, 1)]


def test_a_scale_held_at_1_from_the_run_s_start_is_no_scaler_s():
    # a bf16 run, or MindFormers' `scale_sense: 1.0` (a new user's trial): a fixed scale of 1 from step 1, and two
    # steps whose gradients are NaN (overflow: the update skipped): a nan_inf, no loss-scale collapse
    loss = noisy_losses(60)
    recs = [StepRecord(i + 1, loss=math.nan if i in (49, 50) else loss[i], overflow=i in (49, 50), loss_scale=1.0)
            for i in range(60)]
    assert [(e.rule, e.step) for e in run(recs)] == [("nan_inf", 50), ("nan_inf", 51)]
    # a scale that fell to 1 (a dynamic scaler) is a collapse at its fall; overflows at 1 in an excerpt that starts
    # there past start-up (the fall came before it) are one
    fell = [StepRecord(i + 1, loss=loss[i], overflow=i == 4, loss_scale=2.0 if i < 5 else 1.0) for i in range(6)]
    assert fired(fell + recs[6:], "loss_scale_collapse") == [(6, 6)]
    late = [StepRecord(r.step + 17000, loss=r.loss, overflow=r.overflow, loss_scale=1.0) for r in recs]
    assert fired(late, "loss_scale_collapse") == [(17051, 17051)]


def test_an_overflow_at_the_floor_after_one_that_left_the_scale_there_is_a_collapse():
    # MindYOLO (tests/data/reallogs/tune/mindyolo_v12s_..): `overflow, drop step, loss scale adjust to 1.0` in epoch
    # 1, read as an overflow at step 301 at a scale of 1, the epoch's steps printed every 100 without a scale, then
    # the same message again: the scaler at its minimum, overflowing still
    recs = [StepRecord(300, loss=13.68), StepRecord(301, overflow=True, loss_scale=1.0), StepRecord(400, loss=13.89),
            StepRecord(401, overflow=True, loss_scale=1.0)]
    assert fired(recs, "loss_scale_collapse") == [(401, 401)]
    assert run(recs[:3]) == []  # one overflow to 1: the scaler may have just got there
    # a bf16 run's scale of 1, a skipped iteration after a clean one (Megatron-LM, tune/megatron_llm_bad_gradnorm_pr34)
    bf16 = [StepRecord(3633, loss=2.1, loss_scale=1.0, overflow=False), StepRecord(3634, loss_scale=1.0, overflow=True)]
    assert fired(bf16, "loss_scale_collapse") == []


def test_a_resumed_run_s_spike_with_overflows_is_a_spike_and_a_storm():
    # BigScience tr8b-104B resumed at iteration 17060: the loss 2.67 -> 4.37 as DeepSpeed's overflows begin
    # (an overflowed step's loss is its batch's real loss: it is judged)
    rows = [(17060, 2.665295, 1048576.0, False), (17061, 2.667121, 1048576.0, False),
            (17062, 4.374269, 1048576.0, True), (17063, 4.365822, 524288.0, True),
            (17064, 4.391485, 262144.0, True), (17065, 4.404639, 131072.0, True), (17066, 4.398458, 131072.0, False)]
    events = run([StepRecord(s, loss=x, loss_scale=ls, overflow=o) for s, x, ls, o in rows])
    assert [(e.rule, e.step, e.onset_step) for e in events] == [("loss_spike", 17062, 17062),
                                                                 ("overflow_storm", 17064, 17062)]


def test_loss_scale_halved_many_times_in_a_late_excerpt_is_a_collapse():
    # fairseq: 12 overflows in a row after update 10198, the scale 0.5 -> 0.000122
    recs = [StepRecord(10198, loss=6.343, loss_scale=0.5)]
    recs += [StepRecord(10199 + i, overflow=True, loss_scale=0.5 / 2 ** (i + 1)) for i in range(12)]
    hits = {e.rule: (e.step, e.onset_step) for e in run(recs)}
    # the first overflow takes the scale from 0.5 to 0.25: below the floor (1) and falling, a collapse at once
    assert hits == {"overflow_storm": (10201, 10199), "loss_scale_collapse": (10199, 10199)}


def test_a_fall_to_the_floor_is_reported_once_while_the_scale_stays_there():
    # a static scale of 1 set to 5 for one step (a restored train state) and back: one fall to the floor, not one
    # event per cooldown for the rest of the run (a new-user trial's 1000-step run reported six)
    recs = [StepRecord(i, loss=3.0, loss_scale=5.0 if i == 403 else 1.0, overflow=False) for i in range(1, 1001)]
    assert fired(recs, "loss_scale_collapse") == [(404, 404)]
    # a rise above the floor and a new fall to it: a second event
    again = recs + [StepRecord(1000 + i, loss=3.0, loss_scale=4.0 if i < 5 else 1.0, overflow=False) for i in range(1, 9)]
    assert fired(again, "loss_scale_collapse") == [(404, 404), (1005, 1005)]


def test_a_scale_below_its_floor_and_falling_is_a_collapse_with_no_higher_scale_seen():
    # apex: the excerpt starts with "Gradient overflow ... reducing loss scale to 1.52587890625e-05"
    loss = noisy_losses(60)
    before = [StepRecord(1400 + i, loss=loss[i], overflow=False) for i in range(30)]
    collapse = [StepRecord(1430, loss=loss[30], overflow=True, loss_scale=1.52587890625e-05),
                StepRecord(1431, loss=loss[31], overflow=False, loss_scale=1.52587890625e-05),
                StepRecord(1441, loss=loss[32], overflow=True, loss_scale=7.62939453125e-06)]
    assert fired(before + collapse, "loss_scale_collapse") == [(1430, 1430)]
    # a scale below the floor that does not fall (a static scale, an excerpt between overflows) is not judged
    static = [StepRecord(1400 + i, loss=loss[i], overflow=False, loss_scale=0.5) for i in range(60)]
    assert fired(static, "loss_scale_collapse") == []
    # nor a bf16 run's scale of 1 on a skipped step (at the floor, not below it)
    bf16 = [StepRecord(i + 1, loss=loss[i], overflow=i == 40, loss_scale=1.0) for i in range(60)]
    assert fired(bf16, "loss_scale_collapse") == []


def test_a_start_up_overflowing_at_the_floor_is_no_calibration():
    # deepspeedai/DeepSpeed PR #1593: a run's first overflow message "Attempted loss scale: 1, reducing to 1"
    # (the scaler at its minimum); issue #697: the fused optimizer's overflows at 1 on iteration 8
    for first in (1, 8):
        recs = [StepRecord(first + i, overflow=True, loss_scale=1.0, loss_scale_next=1.0) for i in range(2)]
        assert fired(recs, "loss_scale_collapse") == [(first, first)]
    # a calibration from 2^16 that overflows down to 1: its fall reaches the floor, a collapse there
    fall = [StepRecord(i + 1, overflow=True, loss_scale=2.0 ** (16 - i)) for i in range(17)]
    assert fired(fall, "loss_scale_collapse") == [(17, 17)]
    assert fired(fall[:16], "loss_scale_collapse") == []  # 2^16 -> 2: calibration


def test_a_calibration_seen_only_at_its_ends_stays_calibration():
    # GLM-6B, sink size 4: the first two sinks overflow while the scale falls from 2^28; then clean at 2^14
    recs = [StepRecord(4, loss=2.244, overflow=True, loss_scale=268435460.0, steps=4),
            StepRecord(8, loss=2.499, overflow=True, loss_scale=16777216.0, steps=4)]
    recs += [StepRecord(s, loss=x, overflow=False, loss_scale=16384.0, steps=4)
             for s, x in ((116, 2.220), (120, 2.092), (124, 2.346))]
    assert run(recs) == []


def test_a_learning_rate_over_its_peak_is_an_lr_surge_at_its_step():
    loss = noisy_losses(80)
    recs = [StepRecord(i + 1, loss=loss[i], lr=1e-3) for i in range(60)]
    surged = recs + [StepRecord(61, loss=loss[60], lr=3e-2)]
    (ev,) = run(surged)
    assert (ev.rule, ev.step, ev.onset_step, ev.value) == ("lr_surge", 61, 61, 3e-2)
    assert run(recs + [StepRecord(61, loss=loss[60], lr=2.9e-3)]) == []  # under ratio (3) x the peak
    assert run(surged, Rules({"lr_surge": {"enabled": False}})) == []


@pytest.mark.parametrize("every", [1, 7, 100])
def test_a_linear_warm_up_from_zero_and_a_restart_are_not_lr_surges(every):
    # the LR grows in proportion to the step up to step 2000, decays (cosine) to a tenth by step 3000, then
    # restarts at the peak every 1000 steps (a saw-tooth down to a tenth); logged every `every` steps from step 1
    def lr(s):
        if s <= 2000:
            return 3e-4 * s / 2000
        if s <= 3000:
            return 3e-4 * (0.55 + 0.45 * math.cos(math.pi * (s - 2000) / 1000))
        return 3e-4 * (1 - 0.9 * ((s - 3000) % 1000) / 1000)

    steps = [1, *range(every, 7000, every)]
    assert run([StepRecord(s, lr=lr(s)) for s in steps]) == []


def test_the_learning_rate_at_step_0_is_no_reference():
    # records numbered by epoch, the LR warmed up per iteration (the corpus file
    # mindspore_ssc_resnet50_step0_batch_time_data_time_scaling_sens.log: `epoch: 0, step: 0, .. lr: 0.000028`)
    assert run([StepRecord(e, lr=x) for e, x in enumerate((0.000028, 0.010028, 0.020028))]) == []
    (ev,) = run([StepRecord(e, lr=x) for e, x in enumerate((0.000028, 0.010028, 0.020028, 0.2))])
    assert (ev.rule, ev.step) == ("lr_surge", 3)


def test_a_run_that_logs_no_overflow_flag_ends_calibration_at_its_first_steady_scale():
    # Megatron-LM logging every iteration: the start-up halvings 2^32 -> 2^17 have no flag, then the scale
    # holds (clean steps); a storm at steps 10-12 is trouble, not calibration
    loss = noisy_losses(30)
    start = [StepRecord(i + 1, loss=loss[i], loss_scale=2.0 ** (32 - i)) for i in range(5)]
    steady = [StepRecord(6 + i, loss=loss[5 + i], loss_scale=2.0 ** 28) for i in range(4)]
    assert run(start + steady) == []
    storm = [StepRecord(10 + i, loss=loss[9 + i], loss_scale=2.0 ** (27 - i)) for i in range(3)]
    (ev,) = run(start + steady + storm)
    assert (ev.rule, ev.step, ev.onset_step) == ("overflow_storm", 12, 10)


def test_each_rule_s_detector_carries_its_id_fields_plot_and_settings():
    import inspect
    from dataclasses import fields

    from training_monitor import detectors, report
    from training_monitor.ruleset import SETTINGS

    record_fields = {f.name for f in fields(StepRecord)}
    common = {f.name for f in fields(detectors.RuleSettings)}
    assert set(SETTINGS) == set(Rules().rules) and set(SETTINGS) - set(detectors.DETECTORS) == {"stall", "eval_loss_spike",
                                                                                             "eval_nan", "trainer_crash"}
    assert set(detectors.EVALUATORS) == {"eval_loss_spike", "eval_nan"}  # judged on evaluation losses, not step records
    for rule, cls in {**detectors.DETECTORS, **detectors.EVALUATORS}.items():
        assert cls.rule == rule and bool(cls.reads) == (rule in detectors.DETECTORS), rule
        assert set(cls.reads) <= record_fields, rule
        assert cls.plots in report.ROWS and report.RULE_ROW[rule] == cls.plots, rule
        public = {name for name, _ in inspect.getmembers(cls, inspect.isgetsetdescriptor)} - {"cfg"}
        # each setting is the detector's (a common one the Judge reads from it: skipped_run)
        assert {f.name for f in fields(cls.settings)} - common == public - {"skipped_run"}, rule
    for cls in SETTINGS.values():
        assert all(f.metadata["doc"] and "\n" not in f.metadata["doc"] for f in fields(cls)), cls
    assert report.VALUE_IS_PLOTTED == {"loss_spike", "grad_norm_spike", "loss_degenerate"}


def test_default_rules_yaml_is_generated_from_the_settings_classes():
    from training_monitor.ruleset import SETTINGS, default_rules_yaml

    shipped = Path(__file__).resolve().parent.parent / "monitor" / "default_rules.yaml"
    assert shipped.read_text() == default_rules_yaml(), \
        "regenerate: python -c \"from training_monitor.ruleset import default_rules_yaml as y; print(y(), end='')\" " \
        "> monitor/default_rules.yaml"
    rules = Rules()  # what the engine runs is what the classes declare
    for rule, cls in SETTINGS.items():
        cfg, want = rules.rules[rule], cls()
        common = ("severity", "actions", "warmup_steps", "cooldown_steps", "escalation")
        assert tuple(getattr(cfg, k) for k in common) == tuple(getattr(want, k) for k in common)
        assert cfg.params == {k: v for k, v in vars(want).items() if k not in common}


def test_an_event_line_of_a_monitor_with_rollback_off_says_so(log_lines):
    from training_monitor.sinks import LoggedEvents

    nan = [StepRecord(1, loss=3.0), StepRecord(2, loss=math.nan)]
    for rollback in (True, False):
        eng = Engine(Rules.load(), [LoggedEvents(rollback=rollback)])
        for r in nan:
            eng.observe(r)
    lines = [line for line in log_lines if "nan_inf at step 2" in line]
    assert [line.rstrip().rsplit("-> ", 1)[1] for line in lines] == ["alert, rollback", "alert, rollback off"]


def test_a_fresh_run_s_start_judges_an_excursion_against_one_value_with_a_doubled_margin():
    # a fresh run's second loss 1.56x its first (a toy loop's start-up noise) raises nothing; an excerpt's 2.67 ->
    # 4.37 in mid-run (BigScience tr8b's resume) is an event
    assert run([StepRecord(1, loss=21.03), StepRecord(2, loss=32.8)] + [StepRecord(3 + i, loss=20.0) for i in range(5)]) == []
    (ev,) = run([StepRecord(17060, loss=2.665), StepRecord(17061, loss=2.667), StepRecord(17062, loss=4.374)])
    assert (ev.rule, ev.step) == ("loss_spike", 17062)


def test_a_near_zero_noisy_loss_s_level_is_judged_on_its_logarithms_too():
    # a converged regression printed to 4 decimals: its loss wanders 0.004-0.025 (multiplicative noise); five
    # steps around 0.021 against a median of 0.0095 are no level shift, nor three prints of 0.0114 a collapse
    # (values printed twice in a row before: repeats are the print's resolution)
    import random
    rng = random.Random(5)
    losses = [round(0.0095 * math.exp(rng.gauss(0, 0.3)), 4) for _ in range(300)]
    losses[100:102] = [0.0101, 0.0101]  # an earlier repeat
    losses[200:205] = [0.021, 0.0213, 0.0208, 0.0211, 0.0206]
    losses[250:253] = [0.0114] * 3
    recs = [StepRecord(1, loss=13.07)] + [StepRecord(i + 2, loss=x) for i, x in enumerate(losses)]
    assert [(e.rule, e.step) for e in run(recs)] == []
    linear = run(recs, Rules({"loss_spike": {"log_threshold": 0.0}}))  # the test on logarithms off
    assert any(e.rule == "loss_spike" and "loss level" in e.message for e in linear)
