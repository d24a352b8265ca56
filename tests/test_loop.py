"""The monitor in a functional training loop, written the way MindSpore's quick start (``value_and_grad``,
``train_step``) and its msrun tutorial (``epoch: 0, step: N, loss is X`` printed) write it: real MindSpore
training on CPU, PyNative mode (MindSpore's default)."""
import io
import json
import math
import threading

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
import pytest
from mindspore import nn, ops
from prometheus_client.parser import text_string_to_metric_families

from test_replay_text import read
from test_training import scrape
from training_monitor.callbacks import LoopMonitor, ScaledLearningRate, TrainingMonitor
from training_monitor.detectors import DETECTORS
from training_monitor.log import logger
from training_monitor.replay import replay_file, replay_paths

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

BATCH, FEATURES, CLASSES = 8, 16, 4


class Network(nn.Cell):
    """The quick start's ``Network`` reduced to one ``nn.Dense`` (a ReLU would turn a NaN input into 0)."""

    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense = nn.Dense(FEATURES, CLASSES)

    def construct(self, x):
        return self.dense(self.flatten(x))


def arrays(batches, poison=()):
    """``(data, label)`` of a separable classification set of ``batches`` batches; the batches in ``poison``
    carry a NaN."""
    rng = np.random.default_rng(0)
    data = rng.normal(size=(batches * BATCH, FEATURES)).astype(np.float32)
    label = (data @ rng.normal(size=(FEATURES, CLASSES))).argmax(1).astype(np.int32)
    for b in poison:
        data[b * BATCH, 0] = np.nan
    return data, label


def train(monitor, batches, epochs=1, poison=(), lr=0.05, print_to=None, grad_norm=False, each_step=None,
          jit=False):
    """Train as the tutorials do, under ``LoopMonitor``; print the msrun lines to ``print_to`` (a file).
    ``each_step(model, step)`` runs after each judged step; ``jit`` compiles the train step (``ms.jit``, as the
    pipeline-parallel tutorial does). Returns ``(model, optimizer, losses)``."""
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    ms.set_seed(0)
    model = Network()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.SGD(model.trainable_params(), lr)
    data_set = ds.NumpySlicesDataset(arrays(batches, poison), column_names=["image", "label"], shuffle=False)
    data_set = data_set.batch(BATCH)

    def forward_fn(data, label):
        logits = model(data)
        loss = loss_fn(logits, label)
        return loss, logits

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)

    def train_step(data, label):
        (loss, _), grads = grad_fn(data, label)
        optimizer(grads)
        return loss, grads

    train_step = ms.jit(train_step) if jit else train_step
    losses = []
    with LoopMonitor(monitor, model, optimizer) as loop:
        for epoch in range(epochs):
            i = 0
            for data, label in loop.batches(data_set.create_tuple_iterator()):
                loss, grads = train_step(data, label)
                norm = ops.sqrt(ops.addn([ops.square(g).sum() for g in grads])) if grad_norm else None
                if print_to is not None:
                    print("epoch: %s, step: %s, loss is %s" % (epoch, i, loss), file=print_to)  # noqa: UP031 (the docs')
                i += 1
                losses.append(float(loss.asnumpy()))
                stop = loop.step(loss, grad_norm=norm)
                if each_step is not None:
                    each_step(model, len(losses))
                if stop:
                    break
            if loop.stopped:
                break
    return model, optimizer, losses


def test_nan_in_a_functional_loop_rolls_back_with_halved_lr_and_serves_metrics(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=0, run="loop", checkpoint_every=5, healthy_after=5,
                          tokens_per_step=BATCH, n_params=1e4, peak_tflops=1.0, world_size=1)
    seen = {}

    def probe(model, step):
        if step == 10:
            seen["metrics"] = scrape(mon.metrics_url)
        if mon.rollbacks and "after_load" not in seen:
            seen["after_load"] = {p.name: p.asnumpy().copy() for p in model.trainable_params()}
        elif "after_load" in seen and "after_next" not in seen:
            seen["after_next"] = {p.name: p.asnumpy().copy() for p in model.trainable_params()}

    # batch index 22 carries a NaN: step 23's loss is NaN and SGD writes NaN into the weights; the loop's lines
    # and the monitor's log go to one file, as `python train.py > out.log 2>&1` writes them
    with open(tmp_path / "stdout", "w") as out:
        sink = logger.add(out, format="{time} | {level} | {message}")
        try:
            model, optimizer, losses = train(mon, 40, poison={22}, print_to=out, each_step=probe)
        finally:
            logger.remove(sink)
    mon.close()

    assert len(losses) == 40 and math.isnan(losses[22]) and all(math.isfinite(x) for x in losses[23:])
    nan = [e for e in mon.kept.events if e.rule == "nan_inf"]
    assert [(e.step, e.onset_step) for e in nan] == [(23, 23)]
    # checkpoints at 5..20; 20 is still pending at 23 (healthy needs 5 clean steps), so 15 is the target
    (rb,) = mon.rollbacks
    assert (rb["at_step"], rb["to_step"], rb["lr_scale"]) == (23, 15, 0.5)
    ckpt = ms.load_checkpoint(rb["checkpoint"])
    assert {"global_step", "learning_rate"} <= set(ckpt)  # the optimizer's state too
    for name, value in seen["after_load"].items():
        np.testing.assert_array_equal(value, ckpt[name].asnumpy(), err_msg=name)
    assert float(optimizer.learning_rate.asnumpy()) == pytest.approx(0.025)
    # the next update (step 24, batch 23) starts from the loaded weights and moves them by -0.025 x the
    # gradient, computed independently at the checkpoint's weights
    probe_net = Network()
    ms.load_param_into_net(probe_net, ckpt)
    data, label = (ms.Tensor(a[23 * BATCH:24 * BATCH]) for a in arrays(40))
    grads = ms.value_and_grad(lambda x, y: nn.CrossEntropyLoss()(probe_net(x), y), None,
                              probe_net.trainable_params())(data, label)[1]
    for p, g in zip(probe_net.trainable_params(), grads):
        step = seen["after_next"][p.name] - seen["after_load"][p.name]
        np.testing.assert_allclose(step, -0.025 * g.asnumpy(), rtol=1e-4, atol=1e-7, err_msg=p.name)
    assert all(np.isfinite(p.asnumpy()).all() for p in model.trainable_params())
    assert mon.last_record.step == 40 - (23 - 15) and mon.last_record.lr == pytest.approx(0.025)

    fams = {f.name: f for f in text_string_to_metric_families(seen["metrics"])}

    def value(name, suffix=""):
        (s,) = [s for s in fams[name].samples if s.name == name + suffix]
        assert s.labels["run"] == "loop"
        return s.value

    assert value("train_step") == 10 and value("train_loss") == pytest.approx(losses[9], rel=1e-6)
    assert value("train_tokens", "_total") == 10 * BATCH
    assert value("train_step_duration_seconds", "_count") == 10
    tps = value("train_tokens_per_second")
    assert tps > 0 and value("train_mfu_ratio") == pytest.approx(6e4 * tps / 1e12)
    assert 0 < value("train_data_wait_ratio") < 1

    # one engine, two feeds: the loop's printed lines, replayed, give the events of the rules that read the
    # loss (the one value printed); the print counts steps from 0, the monitor from 1; the monitor's own event
    # line after the printed step is that same event, not a second one
    assert "rank 0 nan_inf at step 23 (onset 23)" in (tmp_path / "stdout").read_text()
    replayed = replay_file(str(tmp_path / "stdout"))
    assert replayed.steps == 40 and replayed.skipped["monitor event line of an event replayed"] == 1
    printed = {r for r, d in DETECTORS.items() if "loss" in d.reads}
    live = [(e.rule, e.step, e.onset_step) for e in mon.kept.events if e.rule in printed]
    assert [(e.rule, e.step + 1, e.onset_step + 1) for e in replayed.events] == live


def test_a_scaled_schedule_in_a_jit_train_step_is_halved_by_the_rollback(tmp_path):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=5, healthy_after=5)
    lr = ScaledLearningRate(nn.CosineDecayLR(0.01, 0.05, 40))
    _, optimizer, losses = train(mon, 30, poison={22}, lr=lr, jit=True)
    (rb,) = mon.rollbacks
    assert (rb["at_step"], rb["to_step"]) == (23, 15) and math.isfinite(losses[-1])
    assert float(lr.scale.asnumpy()) == 0.5
    # the optimizer went back to the checkpoint's global step and goes on from there, at half the schedule
    step = int(optimizer.global_step.asnumpy().reshape(-1)[0])
    assert step == 30 - (23 - 15)
    schedule = nn.CosineDecayLR(0.01, 0.05, 40)(ms.Tensor(step, ms.int32))
    assert float(optimizer.get_lr().asnumpy()) == pytest.approx(0.5 * float(schedule.asnumpy()))


def test_healthy_loop_raises_nothing_and_ends_the_monitor(tmp_path, log_lines):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10,
                          strict=True)
    before = set(threading.enumerate())  # (earlier tests' monitors may still end theirs)
    _, _, losses = train(mon, 8, epochs=3, grad_norm=True)
    assert len(losses) == 24 and losses[-1] < losses[0]
    assert mon.kept.events == [] and mon.stop_reason is None and mon.rollbacks == []
    assert mon.last_record.step == 24 and mon.last_record.grad_norm > 0 and mon.last_record.step_time_s > 0
    assert mon.last_record.tokens is None  # (a float feature matrix holds no token ids: no TPS, and it says so)
    assert sum("TPS is not exported: the batch holds no token ids" in line for line in log_lines) == 1
    assert [(e.step, e.status) for e in mon.ledger.entries] == [(10, "healthy"), (20, "pending")]
    watchdogs = [t for t in threading.enumerate() if t.name == "monitor-watchdog" and t not in before]
    for t in watchdogs:  # the train end stopped it: the thread ends at its next look (1 s)
        t.join(timeout=5)
    assert not any(t.is_alive() for t in watchdogs)


def test_mistaken_arguments_are_type_errors_at_once(tmp_path, log_lines):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None)
    model = Network()
    optimizer = nn.SGD(model.trainable_params(), 0.05)
    with pytest.raises(TypeError, match="network must be a Cell, got SGD"):
        LoopMonitor(mon, optimizer, model)  # (swapped)
    loop = LoopMonitor(mon, model, optimizer)
    with pytest.raises(RuntimeError, match="outside its `with LoopMonitor"):
        loop.step(ms.Tensor(1.0))  # (no `with`: no train begin, no checkpoints)
    logits = ms.Tensor(np.zeros((BATCH, CLASSES), np.float32))
    with loop:
        with pytest.raises(TypeError, match=r"loss must be a number or a tensor, got tuple \(with value_and_grad"):
            loop.step((ms.Tensor(1.0), logits))  # grad_fn's (loss, logits) with has_aux=True, given whole
        with pytest.raises(TypeError, match=r"loss must be a scalar or per-device values, got a tensor of shape"):
            loop.step(logits)
        with pytest.raises(TypeError, match="grad_norm must be a number or a tensor, got tuple"):
            loop.step(ms.Tensor(1.0), grad_norm=(ms.Tensor(1.0), ms.Tensor(2.0)))  # the gradients, not their norm
    assert any("no step was reported in this block" in line for line in log_lines)


def test_the_monitor_stops_the_loop_and_its_failures_are_survived(tmp_path, log_lines):
    stopper = TrainingMonitor(output_dir=str(tmp_path / "stop"), metrics_port=None, checkpoint_every=5,
                              healthy_after=5, max_rollbacks=0)
    with pytest.raises(SystemExit, match="training-monitor: stopped the run"):
        train(stopper, 20, poison={12})
    assert stopper.last_record.step == 13 and stopper.stop_reason

    broken = TrainingMonitor(output_dir=str(tmp_path / "broken"), metrics_port=None)
    broken.engine.observe = None  # a bug inside the monitor
    _, _, losses = train(broken, 5)
    assert len(losses) == 5 and sum("training monitor failed" in line for line in log_lines) == 5


# MindSpore's RuntimeErrors put their text in sections between rules, the first one opening the message (the layout
# of tests/data/reallogs/heldout3/mindspore_hccl_ei0006_socket_timeout.log)
SECTIONED = ("\n----------------------------------------------------\n- Framework Error Message: (For framework "
             "developers)\n----------------------------------------------------\nDistribute Task Failed,\nerror msg: "
             "davinci_model : load task fail, return ret: 1343225860\n")


@pytest.mark.parametrize("exc, said", [(ValueError("batch 7: labels out of range"), "batch 7: labels out of range"),
                                       (RuntimeError(SECTIONED), "Distribute Task Failed,")])
def test_an_exception_in_the_loop_is_a_trainer_crash(tmp_path, exc, said):
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None)

    def boom(model, step):
        if step == 7:
            raise exc

    with pytest.raises(type(exc)):
        train(mon, 20, each_step=boom)
    assert [(e.rule, e.step, e.message) for e in mon.kept.events] == [
        ("trainer_crash", 7, f"training raised {type(exc).__name__} after step 7: {said}")]
    assert (tmp_path / "records_rank0.csv").read_text().splitlines()[-1].startswith("7,")


def amp_train(monitor, batches, huge=(), lr=0.05):
    """The mixed-precision loop of MindSpore's ``mindspore.amp`` docs: a ``DynamicLossScaler`` scales the loss,
    ``all_finite`` checks the gradients and the update is skipped when they are not finite; the LR is a
    schedule (under :class:`ScaledLearningRate`), read with ``optimizer.get_lr()`` before the update. Batches
    in ``huge`` are multiplied by 1e38 (the forward pass overflows: a non-finite loss). Returns
    ``(optimizer, losses, lrs)``."""
    from mindspore.amp import DynamicLossScaler, all_finite

    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    ms.set_seed(0)
    model = Network()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.SGD(model.trainable_params(), ScaledLearningRate(nn.CosineDecayLR(0.01, lr, batches)))
    scaler = DynamicLossScaler(scale_value=2 ** 10, scale_factor=2, scale_window=50)
    data, label = arrays(batches)
    for b in huge:
        data[b * BATCH:(b + 1) * BATCH] *= 1e38
    data_set = ds.NumpySlicesDataset((data, label), column_names=["image", "label"], shuffle=False).batch(BATCH)

    def forward_fn(x, y):
        loss = loss_fn(model(x), y)
        return scaler.scale(loss), loss

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)
    losses, lrs = [], []
    with LoopMonitor(monitor, model, optimizer) as loop:
        for x, y in loop.batches(data_set.create_tuple_iterator()):
            (_, loss), grads = grad_fn(x, y)
            finite = all_finite(grads)
            scale, step_lr = scaler.scale_value.value(), optimizer.get_lr()
            if finite:
                optimizer(scaler.unscale(grads))
            scaler.adjust(finite)
            losses.append(float(loss.asnumpy()))
            lrs.append(float(step_lr.asnumpy()))
            if loop.step(loss, overflow=not bool(finite), loss_scale=scale, lr=step_lr):
                break
    return optimizer, losses, lrs


def test_an_overflowed_amp_step_alerts_without_a_rollback_and_the_schedule_s_lr_is_recorded(tmp_path):
    """A batch the forward pass overflows on gives a non-finite loss; the scaler skips its update, so the
    weights are untouched: the nan_inf event alerts and asks for no rollback, until `skipped_run` (3) such
    steps in a row say the weights themselves give non-finite losses."""
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=5, healthy_after=5)
    _, losses, lrs = amp_train(mon, 60, huge={14, 39, 40, 41})
    nan = [(e.step, e.onset_step, e.actions) for e in mon.kept.events if e.rule == "nan_inf"]
    assert not math.isfinite(losses[14]) and nan[0] == (15, 15, ["alert"])
    assert nan[1:] == [(40, 40, ["alert"]), (41, 40, ["alert"]), (42, 40, ["alert", "rollback"])]
    (rb,) = mon.rollbacks
    # 35 was promoted on steps 36-40, the onset among them (not proven): 30
    assert (rb["at_step"], rb["onset_step"], rb["to_step"]) == (42, 40, 30)
    # the LR the loop gave is recorded: the schedule's value, then half of it after the rollback
    rows = (tmp_path / "records_rank0.csv").read_text().splitlines()
    recorded = [float(r.split(",")[5]) for r in rows[1:]]
    assert recorded[:41] == pytest.approx(lrs[:41], rel=1e-6) and recorded[20] < recorded[0]
    assert mon.last_record.lr == pytest.approx(lrs[-1], rel=1e-6) and lrs[-1] < 0.5 * lrs[0]
    # one engine, two feeds: the record log replayed gives the same events, actions and rollback
    from training_monitor.replay.runner import ReplayOptions

    (res,) = replay_paths([str(tmp_path)], options=ReplayOptions(checkpoint_every=5, healthy_after=5))
    key = lambda e: (e.rule, e.step, e.onset_step, e.actions)  # noqa: E731
    assert [key(e) for e in res.events] == [key(e) for e in mon.kept.events]
    assert [(b["at_step"], b["to_step"]) for b in res.would_be_rollbacks()] == [(42, 30)]


def test_the_quick_start_s_train_loop_called_each_epoch_is_one_run(tmp_path):
    # MindSpore's quick start: `for t in range(epochs): train_loop(model, dataset); test_loop(model, dataset, ..)`,
    # here with the monitor inside train_loop. The epochs' steps are numbered on, every block's records and events
    # are written, and a NaN in the third epoch rolls back to a checkpoint of the second
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    ms.set_seed(0)
    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=5, healthy_after=3)
    model, loss_fn = Network(), nn.CrossEntropyLoss()
    optimizer = nn.SGD(model.trainable_params(), 0.05)
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(model(x), y), None, optimizer.parameters)

    def train_loop(data_set):
        with LoopMonitor(mon, model, optimizer) as loop:
            for data, label in loop.batches(data_set.create_tuple_iterator()):
                loss, grads = grad_fn(data, label)
                optimizer(grads)
                loop.step(loss)

    def test_loop(data_set):
        return sum(float(loss_fn(model(x), y).asnumpy()) for x, y in data_set.create_tuple_iterator())

    for t in range(3):
        # 12 batches an epoch; the third epoch's batch 9 (its step 10) carries a NaN
        data_set = ds.NumpySlicesDataset(arrays(12, poison={9} if t == 2 else ()), column_names=["image", "label"],
                                         shuffle=False).batch(BATCH)
        train_loop(data_set)
        assert math.isfinite(test_loop(ds.NumpySlicesDataset(arrays(2), column_names=["image", "label"]).batch(BATCH)))
    mon.close()
    (rb,) = mon.rollbacks
    assert (rb["at_step"], rb["to_step"]) == (34, 30)  # step 10 of the third epoch; the checkpoint after 30 steps
    assert [(e.rule, e.step) for e in mon.kept.events] == [("nan_inf", 34)]
    records = replay_file(str(tmp_path / "records_rank0.csv"))
    assert [(e.rule, e.step) for e in records.events] == [("nan_inf", 34)]
    steps = [int(line.split(",")[0]) for line in open(tmp_path / "records_rank0.csv").read().splitlines()[1:]]
    assert steps == [*range(1, 35), 31, 32]  # 36 steps; after going back to 30, the epoch's last 2
    assert '"action": "rollback"' in (tmp_path / "events_rank0.jsonl").read_text()


# printed every batch, or every 100 batches as the quick start prints (`if batch % 100 == 0`): once an epoch here, each
# `[  0/ 12]` line under its `Epoch N` heading, the epochs' steps numbered on: (t - 1) x 12
@pytest.mark.parametrize("every, printed_steps, eval_step", [(1, range(36), 35), (100, [0, 12, 24], 24)])
def test_the_quick_start_s_printed_test_loop_and_its_evaluation_after_the_loop_decide_as_live(
        tmp_path, every, printed_steps, eval_step):
    # the quick start's train_loop (under the monitor) and test_loop, printing as it prints (`loss: 0.58  [  0/12]`,
    # `Test: ` then ` Accuracy: 12.5%, Avg loss:      nan `), the test loss given to the monitor after the `with` block
    # ended: the third test set carries a NaN. The event is in the event log; the printed log replays to the same
    # evaluation event (no training step was NaN), at the last step it printed, and so does the monitor's output
    # folder
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    ms.set_seed(0)
    mon = TrainingMonitor(output_dir=str(tmp_path / "out"), metrics_port=None)
    model, loss_fn = Network(), nn.CrossEntropyLoss()
    optimizer = nn.SGD(model.trainable_params(), 0.05)
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(model(x), y), None, optimizer.parameters)
    printed = io.StringIO()

    def train_loop(data_set):
        size = data_set.get_dataset_size()
        with LoopMonitor(mon, model, optimizer) as loop:
            for batch, (data, label) in enumerate(loop.batches(data_set.create_tuple_iterator())):
                loss, grads = grad_fn(data, label)
                optimizer(grads)
                loop.step(loss)
                if batch % every == 0:
                    print(f"loss: {loss.asnumpy():>7f}  [{batch:>3d}/{size:>3d}]", file=printed)

    def test_loop(data_set):
        num_batches, total, test_loss, correct = data_set.get_dataset_size(), 0, 0, 0
        for data, label in data_set.create_tuple_iterator():
            pred = model(data)
            total += len(data)
            test_loss += loss_fn(pred, label).asnumpy()
            correct += (pred.argmax(1) == label).asnumpy().sum()
        test_loss /= num_batches
        correct /= total
        print(f"Test: \n Accuracy: {(100 * correct):>0.1f}%, Avg loss: {test_loss:>8f} \n", file=printed)
        return float(test_loss)

    for t in range(3):
        print(f"Epoch {t + 1}\n-------------------------------", file=printed)
        train_loop(ds.NumpySlicesDataset(arrays(12), column_names=["image", "label"], shuffle=False).batch(BATCH))
        test = ds.NumpySlicesDataset(arrays(2, poison={0} if t == 2 else ()), column_names=["image", "label"])
        mon.evaluated({"loss": test_loop(test.batch(BATCH))})
    mon.close()
    live = [(e.rule, e.step) for e in mon.kept.events]
    assert live == [("eval_nan", 36)]
    logged = [json.loads(line) for line in (tmp_path / "out" / "events_rank0.jsonl").read_text().splitlines()]
    assert [(e["rule"], e["step"]) for e in logged] == live
    (tmp_path / "out.log").write_text(printed.getvalue())
    assert "Test: \n Accuracy: " in printed.getvalue() and "Avg loss:      nan \n" in printed.getvalue()
    replayed = replay_file(str(tmp_path / "out.log"))
    assert [(e.rule, e.step) for e in replayed.events] == [("eval_nan", eval_step)]  # the printed counts are 0-based
    assert [r.step for r in read(printed.getvalue().splitlines(True))] == list(printed_steps)
    assert replayed.evaluations == 3
    (res,) = replay_paths([str(tmp_path / "out")])
    assert [(e.rule, e.step) for e in res.events] == live
