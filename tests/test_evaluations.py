"""Evaluation losses as a feed of the engine: the live callback judges the evaluations of a real MindSpore
``Model.fit`` (``valid_dataset``, ``on_eval_end``'s ``eval_results``) and of MindFormers' ``EvalCallBack``, replay
judges the evaluation lines of the same run's log, and both decide the same on the same numbers."""
from functools import partial

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import Callback, LossMonitor, Model

from train_helpers import BATCH, CORPUS, SEQ, tiny_net
from training_monitor.callbacks import TrainingMonitor
from training_monitor.callbacks.tinylm import ByteWindows, make_dataset
from training_monitor.engine import Engine
from training_monitor.replay import replay_file
from training_monitor.replay.fields import evaluation_loss
from training_monitor.ruleset import Rules

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

STEPS = 10  # training batches per epoch
# a 1-layer byte model trained for 40 steps is not sure enough of English for any batch to cost it 3x its
# evaluation loss: the rule fires at 2x here, in both feeds alike
RULES = {"eval_loss_spike": {"ratio": 2.0}}


class EvalNet(nn.Cell):
    """TinyLM's loss as ``(loss, prediction, label)``, the outputs ``Model`` evaluates with ``eval_indexes``."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def construct(self, input_ids, loss_mask):
        loss = self.net(input_ids, loss_mask)
        return loss, loss, loss


class Validation(ByteWindows):
    """The evaluation batches, the same at every evaluation, except at evaluation number ``broken`` (counted from
    1): its windows hold byte 255 only, which English text never has (a validation shard gone bad)."""

    def __init__(self, broken: int):
        super().__init__(CORPUS, SEQ, BATCH, 4, seed=99)
        self.broken, self.evaluation = broken, 0

    def __getitem__(self, i):
        ids, mask = super().__getitem__(i)
        self.evaluation += i == 0
        return (np.full_like(ids, 255) if self.evaluation == self.broken else ids), mask


class PrintEvaluation(Callback):
    """Prints each evaluation's results as a training script does (``eval result: {...}``)."""

    def on_eval_end(self, run_context):
        print(f"eval result: {run_context.original_args().eval_results}", flush=True)


def model():
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(0)
    net = tiny_net()
    opt = nn.SGD(net.trainable_params(), learning_rate=0.05)
    return Model(nn.TrainOneStepCell(net, opt), eval_network=EvalNet(net), eval_indexes=[0, 1, 2],
                 metrics={"Loss": nn.Loss()})


def spikes(events):
    return [(e.rule, e.step, e.onset_step, e.value, e.message) for e in events if e.rule == "eval_loss_spike"]


def test_model_fit_evaluations_and_their_replayed_log_decide_the_same(tmp_path, capsys):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, watchdog=False, rules=RULES)
    train = make_dataset(ByteWindows(CORPUS, SEQ, BATCH, STEPS, 0))
    model().fit(6, train, make_dataset(Validation(broken=4)), valid_frequency=1, dataset_sink_mode=False,
                valid_dataset_sink_mode=False, callbacks=[mon, LossMonitor(1), PrintEvaluation()])
    log = capsys.readouterr().out  # MindSpore's LossMonitor lines ("epoch: 2 step: 3, loss is ..") and the results
    assert log.count("eval result: {'Loss': ") == 6 and "'eval_loss': " in log
    live = spikes(mon.kept.events)
    # the 4th evaluation (after step 40) read the broken shard: its loss over twice the earlier ones', once
    assert [(rule, step, onset) for rule, step, onset, *_ in live] == [("eval_loss_spike", 40, 40)]
    assert "x the median" in live[0][4] and "of the 3 evaluations before" in live[0][4]
    path = tmp_path / "train.log"
    path.write_text(log)
    replayed = replay_file(str(path), Rules(RULES))
    assert replayed.steps == 6 * STEPS and replayed.evaluations == 6
    assert spikes(replayed.events) == live  # same rule, step, onset, value and message


class MaskedOut(Validation):
    """The evaluation batches, their loss masks all zeros at evaluation number ``broken`` (labels all padding):
    the masked mean is 0/0."""

    def __getitem__(self, i):
        ids, mask = super().__getitem__(i)
        return ids, (np.zeros_like(mask) if self.evaluation == self.broken else mask)


def test_a_nan_evaluation_loss_is_an_event_live_and_replayed(tmp_path, capsys):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, watchdog=False)
    train = make_dataset(ByteWindows(CORPUS, SEQ, BATCH, STEPS, 0))
    model().fit(5, train, make_dataset(MaskedOut(broken=3)), valid_frequency=1, dataset_sink_mode=False,
                valid_dataset_sink_mode=False, callbacks=[mon, LossMonitor(1), PrintEvaluation()])
    log = capsys.readouterr().out
    assert log.count("eval result: {'Loss': nan, 'eval_loss': nan}") == 1
    live = [(e.rule, e.step, e.message) for e in mon.kept.events if e.rule.startswith("eval")]
    assert live == [("eval_nan", 30, "evaluation loss is nan at step 30")]  # once; the next evaluation is finite
    path = tmp_path / "train.log"
    path.write_text(log)
    replayed = replay_file(str(path))
    assert [(e.rule, e.step, e.message) for e in replayed.events if e.rule.startswith("eval")] == live
    assert replayed.evaluations == 5  # LossMonitor's `Eval result: ..` after the script's own print: the same one
    # MindSpore's LossMonitor alone prints the fit's metrics too: `Eval result: epoch 3, metrics: {'Loss': nan}`
    own = "".join(line for line in log.splitlines(keepends=True) if not line.startswith("eval result:"))
    assert "Eval result: epoch 3, metrics: {'Loss': nan}" in own
    path.write_text(own)
    replayed = replay_file(str(path))
    assert [(e.rule, e.step, e.message) for e in replayed.events if e.rule.startswith("eval")] == live
    assert replayed.evaluations == 5


def test_mindformers_eval_callback_results_are_judged(tmp_path, log_lines):
    from mindformers.core.callback import EvalCallBack

    net_model = model()
    valid = make_dataset(Validation(broken=4))
    evaluate = EvalCallBack(partial(net_model.eval, valid, dataset_sink_mode=False), step_interval=STEPS)
    # a rollback asked for on an evaluation is not carried out live, and the log says so
    rules = {"eval_loss_spike": {**RULES["eval_loss_spike"], "actions": ["alert", "rollback"]}}
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, watchdog=False, rules=rules)
    net_model.train(6, make_dataset(ByteWindows(CORPUS, SEQ, BATCH, STEPS, 0)), callbacks=[mon, evaluate],
                    dataset_sink_mode=False)
    # MindFormers' EvalCallBack calls Model.eval without the training's callbacks: the monitor wraps its eval_func
    assert [(rule, step) for rule, step, *_ in spikes(mon.kept.events)] == [("eval_loss_spike", 40)]
    assert evaluate.eval_func.func == net_model.eval  # its own eval_func again after training
    assert sum("eval_loss_spike at step 40 asks for rollback: not carried out on an evaluation" in line
               for line in log_lines) == 1


def test_an_evaluation_s_loss_is_read_by_the_alias_table():
    assert evaluation_loss({"Loss": 2.3, "eval_loss": 2.4}) == 2.4  # an evaluation loss's name first
    assert evaluation_loss({"Accuracy": 0.9, "Loss": 2.3}) == 2.3
    assert evaluation_loss({"PerplexityMetric": {"loss": 2.0, "PPL": 7.39}}) == 2.0  # MindFormers' model.eval
    assert evaluation_loss({"val_nll_loss": 1.5, "Top1": 0.3}) == 1.5
    assert evaluation_loss({"PPL": 7.39, "Accuracy": 0.9}) is None and evaluation_loss({"eval_runtime": 3.0}) is None
    engine = Engine()  # the engine judges what either feed gives it
    assert [engine.evaluate(step, x) for step, x in ((10, 2.3), (20, 2.2))] == [[], []]
    [event] = engine.evaluate(30, 7.4, rank=3)
    assert (event.rule, event.step, event.onset_step, event.rank, event.source) == ("eval_loss_spike", 30, 30, 3, "rule")
    engine.rewind(20)  # a rollback to step 20 forgets the evaluations after it
    assert engine.evaluate(30, 7.4) != []
