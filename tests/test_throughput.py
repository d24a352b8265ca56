"""throughput_drop on a real CPU training run: caught when the run itself slows down, silent on the machine's
noise (this 2-core machine is shared: its load stretches the step's compute several times over while the
test runs), and steps slowed for a reason the monitor knows are not judged."""
import csv
import time

import mindspore as ms
import pytest
from mindspore import nn
from mindspore.train import Callback, Model

from train_helpers import BATCH, CORPUS, SEQ, Served, tiny_net
from training_monitor.callbacks import TrainingMonitor
from training_monitor.callbacks.tinylm import make_dataset
from training_monitor.replay import replay_file
from training_monitor.ruleset import Rules

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

STEPS = 320
PIPELINE_S = 0.04  # the data pipeline's time per batch: the run's bottleneck, so its speed is the run's
PIPELINE_SLOW = range(150, 200)  # batches (0-based) the pipeline takes twice as long for: steps 151-200
CALLBACK_SLOW = range(260, 310)  # steps after which a callback sleeps 2 x PIPELINE_S (steps 260-309)


class SlowSource(Served):
    def __getitem__(self, i):
        time.sleep(PIPELINE_S * (2 if i in PIPELINE_SLOW else 1))
        return super().__getitem__(i)


class SleepingCallback(Callback):
    """A callback listed after the monitor that sleeps at the end of some steps: the rank is slowed between
    its steps, as by any other work on the training thread. (While it sleeps, the pipeline gets ahead and
    refills its prefetch queue, so the steps after this stretch run faster for a while: the run ends first.)"""

    def on_train_step_end(self, run_context):
        if run_context.original_args().cur_step_num in CALLBACK_SLOW:
            time.sleep(2 * PIPELINE_S)


def test_a_slower_pipeline_and_a_sleeping_callback_are_drops_and_nothing_else_is(tmp_path):
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(0)
    net = tiny_net()
    source = SlowSource(CORPUS, SEQ, BATCH, STEPS, 0)
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, watchdog=False, checkpoint_every=50,
                          tokens_per_step=BATCH * SEQ, exit_on_stop=False)
    cell = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.05))
    Model(cell).train(1, make_dataset(source), callbacks=[mon, SleepingCallback()], dataset_sink_mode=False)
    mon.close()
    drops = [(e.step, e.onset_step) for e in mon.kept.events if e.rule == "throughput_drop"]
    assert [e.rule for e in mon.kept.events if e.rule != "throughput_drop"] == []
    # one drop per slowed stretch, found within 20 steps of its start, its onset inside it
    assert len(drops) == 2, drops
    (pipe, pipe_onset), (cb, cb_onset) = drops
    assert 151 <= pipe_onset <= pipe <= 171 and 261 <= cb_onset <= cb <= 281, drops
    # the step after each of the monitor's checkpoint saves is known to be slow, and replay reads that back
    records = str(tmp_path / "records_rank0.csv")
    replayed = replay_file(records)
    assert [(e.rule, e.step, e.onset_step) for e in replayed.events] == \
        [(e.rule, e.step, e.onset_step) for e in mon.kept.events]
    slow = [row["step"] for row in csv.DictReader(open(records)) if row["slow_reason"] == "checkpoint"]
    assert slow == ["51", "101", "151", "201", "251", "301"]


class BoundSource(Served):
    def __getitem__(self, i):
        # a pipeline many times slower than the tiny model's step (~3 ms; 0.1-0.25 s on a host loaded 3x over
        # its cores): the run waits for data once the batches prefetched while compiling are used up
        time.sleep(0.3)
        return super().__getitem__(i)


class StopOnEvent(Callback):
    """Stops the training at the first event of ``mon``: a run is as long as its prefetched batches need (more
    of them on a loaded host, whose compile takes longer)."""

    def __init__(self, mon):
        self.mon = mon

    def on_train_step_end(self, run_context):
        if self.mon.kept.events:
            run_context.request_stop()


def test_an_input_bound_run_is_reported_live_and_in_replay(tmp_path):
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(0)
    net = tiny_net()
    rules = {"throughput_drop": {"bound_seconds": 1.0}}  # (30 s by default: a short test waits 1 s in all)
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, watchdog=False, rules=rules,
                          tokens_per_step=BATCH * SEQ, exit_on_stop=False)
    cell = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.05))
    Model(cell).train(1, make_dataset(BoundSource(CORPUS, SEQ, BATCH, 100, 0)), callbacks=[mon, StopOnEvent(mon)],
                      dataset_sink_mode=False)
    mon.close()
    (ev,) = mon.kept.events
    assert ev.rule == "throughput_drop" and ev.message.startswith("input-bound:"), ev
    assert 6 <= ev.onset_step <= ev.step < 100, ev  # after the warm-up (the batches prefetched while compiling)
    replayed = replay_file(str(tmp_path / "records_rank0.csv"), rules=Rules(rules))
    assert [(e.rule, e.step, e.onset_step) for e in replayed.events] == [(ev.rule, ev.step, ev.onset_step)]


def test_a_rank_other_than_0_sends_the_alerts_of_its_own_measurements(tmp_path):
    """Under `ranks: rank0`, rank 0 sends what the consensus makes the same on every rank (a NaN loss); a slow
    data loader shows on its own rank only (a new user's 2-rank job: rank 1's throughput_drop reached no chat),
    so that rank sends it. Rank 1 here trains alone (no consensus: the alert filter is the rank's)."""
    from services import Receiver, text_of

    receiver = Receiver()
    try:
        ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
        ms.set_seed(0)
        net = tiny_net()
        rules = {"throughput_drop": {"bound_seconds": 1.0}, "nan_inf": {"actions": ["alert"]}}
        mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, watchdog=False, rules=rules, rank=1,
                              tokens_per_step=BATCH * SEQ, exit_on_stop=False,
                              alerts={"sinks": [{"name": "g", "type": "webhook", "url": f"{receiver.url}/webhook/in"}]})
        source = BoundSource(CORPUS, SEQ, BATCH, 100, 0)
        source.poison = {40}  # a NaN loss at step 41, after the input-bound run was reported: the run stops there
        stop = StopOnEvent(mon)
        stop.on_train_step_end = lambda rc: rc.request_stop() if any(
            e.rule == "nan_inf" for e in mon.kept.events) else None
        cell = nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), learning_rate=0.05))
        Model(cell).train(1, make_dataset(source), callbacks=[mon, stop], dataset_sink_mode=False)
        mon.close()
        assert [e.rule for e in mon.kept.events] == ["throughput_drop", "nan_inf"], mon.kept.events
        (req,) = receiver.wait_for("/webhook")
        assert "throughput_drop" in text_of(req) and "nan_inf" not in text_of(req)
    finally:
        receiver.close()
