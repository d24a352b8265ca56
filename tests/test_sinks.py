"""The sink protocol: what the engine and the feeds call, and the bounded event lists (no framework needed)."""
import math

from training_monitor.alerts import AlertsConfig, AlertSender
from training_monitor.engine import Engine
from training_monitor.eventlog import EventLog
from training_monitor.metrics import Metrics
from training_monitor.record import StepRecord
from training_monitor.recordlog import FIELDS, RecordLog
from training_monitor.replay import replay_file
from training_monitor.sinks import MAX_EVENTS, EventList, Sink, overrides


def test_each_sink_takes_the_hooks_it_overrides():
    sender = AlertSender(AlertsConfig.load({"sinks": [{"type": "slack", "url": "http://127.0.0.1:9/x"}]})[0])
    try:
        taken = {type(s).__name__: [h for h in ("on_event", "on_record", "on_action") if overrides(s, h)]
                 for s in (EventLog("/dev/null"), RecordLog("/dev/null"), Metrics(), EventList(), sender, Sink())}
    finally:
        sender.close(0.1)
    assert taken == {"EventLog": ["on_event"], "RecordLog": ["on_record"], "Metrics": ["on_event", "on_record"],
                     "EventList": ["on_event"], "AlertSender": ["on_action"], "Sink": []}


def test_an_event_list_keeps_the_first_events_in_order_and_counts_the_others():
    kept, everything = EventList(limit=3), EventList(limit=100)
    eng = Engine(sinks=[kept, everything])
    returned = [e for s in range(1, 8) for e in eng.observe(StepRecord(s, loss=math.nan))]
    assert len(returned) == 7 and everything.events == returned and everything.events_dropped == 0
    assert kept.events == returned[:3] and kept.events_dropped == 4


def test_a_replay_keeps_max_events_per_log_and_counts_the_rest(tmp_path):
    log = tmp_path / "records_rank0.csv"
    rows = [",".join("nan" if f == "loss" else str(s) if f == "step" else "" for f in FIELDS)
            for s in range(1, MAX_EVENTS + 6)]
    log.write_text(",".join(FIELDS) + "\n" + "\n".join(rows) + "\n")
    res = replay_file(str(log))
    assert res.steps == MAX_EVENTS + 5 and len(res.events) == MAX_EVENTS and res.events_dropped == 5
    assert [e.step for e in res.events[:2]] == [1, 2] and res.events[-1].step == MAX_EVENTS
    assert res.to_dict()["anomalies_not_kept"] == 5


def test_a_failure_repeated_from_the_same_place_is_printed_once_per_window():
    """The monitor's stderr handler (a fresh process: its first log installs it): a ledger that cannot be saved
    fails at every save; the first failure is printed, the repeats from the same line are counted and named
    with the next one printed after the window; events (bound report) are always printed."""
    import subprocess
    import sys

    script = """
import training_monitor.log as log
from training_monitor.log import logger
for name in ("first", "second", "first"):  # the same place, about other things: each sink's first failure
    logger.error("alert sink {} is down (ConnectionError at 0x7f{}); retrying", name, len(name))
for i in range(7):
    if i == 5:
        log.REPEAT_WINDOW = 0.0
    logger.error("checkpoint ledger /x/ledger.json not saved (attempt {})", i)
    logger.bind(report=True).error("rank 0 nan_inf at step {}", i)
"""
    err = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60).stderr
    failures = [line.split(" - ", 1)[1] for line in err.splitlines() if "not saved" in line]
    assert failures[0] == "checkpoint ledger /x/ledger.json not saved (attempt 0)"
    assert failures[1].startswith("checkpoint ledger /x/ledger.json not saved (attempt 5) (and 4 more from the same "
                                  "place in the ") and len(failures) == 3
    assert sum("nan_inf at step" in line for line in err.splitlines()) == 7
    assert [line.split("alert sink ")[1][:6] for line in err.splitlines() if "alert sink" in line] == \
        ["first ", "second"]


def test_train_stalled_is_set_by_a_stall_and_cleared_by_the_next_step():
    from training_monitor.ruleset import Rules

    metrics = Metrics("r", 0)
    engine = Engine(Rules.load(), [metrics])

    def stalled():
        (family,) = [f for f in metrics.collect() if f.name == "train_stalled"]
        return family.samples[0].value

    engine.observe(StepRecord(1, loss=2.0))
    assert stalled() == 0
    engine.report("stall", 1, 120.0, "no step finished for 120 s since step 1", 0, "watchdog")
    assert stalled() == 1
    metrics.on_record(StepRecord(2, loss=2.0))
    assert stalled() == 0


def test_the_tokens_counter_exists_once_a_record_counts_its_tokens():
    # a log or a run whose tokens are not known has no train_tokens_total series: a dashboard then shows no TPS,
    # not a TPS of 0
    from prometheus_client import generate_latest

    m = Metrics("r", 0)
    m.on_record(StepRecord(1, loss=2.0, step_time_s=0.1))
    assert b"train_tokens_total" not in generate_latest(m.registry)
    m.on_record(StepRecord(2, loss=2.0, step_time_s=0.1, tokens=512))
    assert b'train_tokens_total{rank="0",run="r"} 512.0' in generate_latest(m.registry)
