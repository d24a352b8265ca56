"""``monitor replay`` on the formats no shared sample covers, all but MindFormers', CSV, the event log and
TensorBoard read by the generic text reader (monitor/replay/text.py). Each input follows the line its trainer
prints, as read in the trainer's source (cited at each test); the TensorBoard files are written with TensorBoard
itself."""
import io
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training_monitor.record import StepRecord
from training_monitor.replay import ReplayError, csvlog, replay_file, replay_paths, text
from training_monitor.replay.base import MERGED, Evaluation, Report
from training_monitor.replay.summary import as_text
from training_monitor.ruleset import Rules


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return str(path)


def losses(n, spike_at=None, nan_at=None):
    """A slowly falling, slightly noisy loss per step 1..n, with an optional spike or NaN."""
    return {s: math.nan if s == nan_at else 9.0 if s == spike_at else 3.0 - 0.001 * s + 0.01 * (s % 3)
            for s in range(1, n + 1)}


# mindspore/python/mindspore/train/callback/_loss_monitor.py: print("epoch: %s step: %s, loss is %s" % ...)
# (step counted within the epoch) and its NaN stop "In epoch: {} step: {}, loss is NAN or INF, training process
# cannot continue, terminating training."; _time_monitor.py: "{mode} epoch time: {:5.3f} ms, per step time:
# {:5.3f} ms" + " (data time: {:5.3f} ms)"; _flops_collector.py: "Train epoch time: .. ms, per step time: .. ms,
# mfu:0.47% hfu:0.47%" (docstring), 'time_monitor{type="per_step_time"} {} {}' + " mfu:..% hfu:..%", and
# "{mode} per step time: {:5.3f} ms" + " mfu:..% hfu:..%".
def test_mindspore_loss_time_and_flops_monitors(tmp_path):
    lines = []
    for s, loss in losses(30).items():
        epoch, step = (s - 1) // 10 + 1, (s - 1) % 10 + 1
        lines.append(f"epoch: {epoch} step: {step}, loss is {loss}")
        if step == 10:
            lines.append("Train epoch time: 5012.345 ms, per step time: 501.234 ms (data time: 2.500 ms)")
    lines[2] = "epoch: 1 step: 3, loss is Tensor(shape=[], dtype=Float32, value= 2.987)"
    lines += ["Train per step time: 135.572 ms mfu:0.47% hfu:0.47%",
              "Eval epoch time: 100.000 ms, per step time: 10.000 ms",
              "Eval result: epoch 3, metrics: {'acc': 0.9}",
              'time_monitor{type="per_step_time"} 140.5 1714550400123 mfu:31.25% hfu:33.10%',
              ("ValueError: In epoch: 4 step: 1, loss is NAN or INF, training process cannot continue, "
               "terminating training.")]
    res = replay_file(write(tmp_path, "ms.log", "\n".join(lines) + "\n"))
    assert res.format == "text" and res.steps == 30 and res.merged_lines == 5
    assert res.skipped == {"summary or evaluation line": 2}
    assert [(e.rule, e.step, e.source) for e in res.events] == [("nan_inf", 31, "trainer")]
    # epochs of 10 steps: epoch 3 step 10 is step 30; the time and MFU lines completed it
    assert (res.last.step, res.last.step_time_s, res.last.mfu) == (30, 0.1405, 0.3125)
    assert res.last.data_wait_s == 0.0025


def test_mindspore_timing_lines_complete_the_step_before(tmp_path):
    p = text.Parser()
    rec = p.feed("epoch: 1 step: 4, loss is 2.5")
    assert p.feed("epoch time: 2000.000 ms, per step time: 500.000 ms") is None and p.reason is MERGED
    assert rec.step_time_s == 0.5 and rec.mfu is None
    assert p.feed("Train epoch time: 271.144 ms, per step time: 135.572 ms, mfu:0.47% hfu:0.47%") is None
    assert rec.step_time_s == pytest.approx(0.135572) and rec.mfu == pytest.approx(0.0047)



@pytest.mark.parametrize("between, steps", [
    (["Train epoch time: 50.000 ms, per step time: 10.000 ms"], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),  # TimeMonitor
    (["Test: ", " Accuracy: 91.5%, Avg loss: 0.281200 "], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),  # an evaluation
    ([], [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]),  # no end between: a restart (a resumed process counts from 1 again)
    (["Traceback (most recent call last):"], [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]),
])
def test_loss_monitor_counting_the_same_epoch_again_after_its_end_is_the_next_train_call(between, steps):
    # a script calling `model.train(1, ..)` once an epoch: each call's LossMonitor prints `epoch: 1 step: 1..`
    p = text.Parser()
    lines = [f"epoch: 1 step: {s}, loss is {2.5 - s / 10}" for s in range(1, 6)]
    recs = [p.feed(line) for line in lines + between + lines]
    assert [r.step for r in recs if r.__class__ is StepRecord] == steps

# Megatron-LM megatron/training/training.py training_log(): " iteration {:8d}/{:8d} |", " consumed samples:
# {:12d} |", " elapsed time per iteration (ms): {:.1f} |", " learning rate: {:.6E} |", " global batch size:
# {:5d} |", " {key}: {avg:.6E} |" only `if avg >= 0.0` (so a NaN average is left out), " loss scale: {:.1f} |",
# " grad norm: {:.3f} |", " number of skipped iterations: {:3d} |", " number of nan iterations: {:3d} |".
MEGATRON = (" iteration {it:8d}/    1000 | consumed samples: {samples:12d} | elapsed time per iteration (ms): "
            "300.0 | learning rate: 1.000000E-04 | global batch size:     8 |{loss} loss scale: {scale:.1f} | "
            "grad norm: 1.500 | number of skipped iterations: {skipped:3d} | number of nan iterations: {nan:3d} |")


# NeMo 2 (Lightning) step lines, as a BioNeMo Evo2 fine-tune printed them (tests/data/reallogs/tune/nemo_evo2_..):
# `Training epoch 0, iteration 50/99 | lr: .. | global_step: 50 | reduced_train_loss: 1.257 | train_step_timing in s:
# 0.685 | consumed_samples: 204 | val_loss: 1.619`, `val_loss` on every step line from the first validation on; a
# checkpoint save's `Start time: 1750290740.432s` and a checkpoint path's `..-val_loss=0.0000-epoch=0-...ckpt`
def test_nemo_step_lines_carrying_the_last_validation_loss():
    from pathlib import Path
    path = next((Path(__file__).parent / "data" / "reallogs" / "tune").glob("nemo_evo2_*.log"))
    p = text.Parser()
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        items += [p.feed(line), *p.after]  # (the evaluations a step line carries come after its record)
        p.after = []
    steps = [r for r in items if isinstance(r, StepRecord)]
    assert [r.step for r in steps] == list(range(45, 63))
    assert (steps[0].loss, steps[0].step_time_s, steps[5].step_time_s) == (1.288, 0.2382, 0.685)
    assert [(e.step, e.loss) for e in items if isinstance(e, Evaluation)] == [(49, 1.619)]  # not the path's 0.0
    assert replay_file(str(path)).events == []


def megatron_line(it, loss, scale=65536.0, skipped=0, nan=0):
    return MEGATRON.format(it=it, samples=8 * it, loss="" if loss is None else f" lm loss: {loss:.6E} |",
                           scale=scale, skipped=skipped, nan=nan)


def test_megatron_nan_iterations_without_loss_are_a_nan_report(tmp_path):
    lines = [megatron_line(10 * s, loss) for s, loss in losses(30).items()]
    lines.append(megatron_line(310, None, skipped=2, nan=2))  # the loss field dropped, 2 NaN iterations counted
    res = replay_file(write(tmp_path, "megatron.log", "\n".join(lines) + "\n"))
    assert res.format == "text" and res.steps == 30 and res.reports == 1
    assert [(e.rule, e.step, e.source) for e in res.events] == [("nan_inf", 310, "trainer")]
    assert "2 iteration(s) with a NaN/Inf loss" in res.events[0].message


def test_megatron_missing_loss_without_nan_count_is_a_nan_loss_and_all_skipped_is_no_loss():
    p = text.Parser()
    p.feed(megatron_line(10, 3.0))
    bf16_nan = p.feed(megatron_line(20, None))  # bf16 runs do not skip: the NaN average is just left out
    assert bf16_nan.step == 20 and math.isnan(bf16_nan.loss)
    all_skipped = p.feed(megatron_line(30, 0.0, scale=32768.0, skipped=10))  # 0 average: no iteration advanced
    assert all_skipped.loss is None and all_skipped.overflow is True
    line = megatron_line(40, 2.5)
    cut = line.index("ite", line.index("elapsed"))
    wrapped = p.feed(line[:cut])  # hard-wrapped in the middle of a name: the second half completes the record
    assert (wrapped.step, wrapped.loss) == (40, None)
    assert p.feed(line[cut:]) is None and p.reason == "merged"
    assert (wrapped.loss, wrapped.step_time_s, wrapped.grad_norm) == (2.5, 0.3, 1.5)


# karpathy/nanoGPT train.py: print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu
# {running_mfu*100:.2f}%") with running_mfu = -1.0 until measured, and print(f"step {iter_num}: train loss
# {losses['train']:.4f}, val loss {losses['val']:.4f}").
def test_nanogpt_iter_lines(tmp_path):
    lines = ["step 0: train loss 10.9, val loss 10.9"]
    for s, loss in losses(40, nan_at=38).items():
        mfu = -100.0 if s < 5 else 31.2
        lines.append(f"iter {s}: loss {loss:.4f}, time {150 + s % 2:.2f}ms, mfu {mfu:.2f}%")
    res = replay_file(write(tmp_path, "nano.log", "\n".join(lines) + "\n"))
    # the evaluation line before any step line is read as step 0 (a log may print its validation loss on every
    # step line); once step lines without one came, such a line is a summary
    assert res.format == "text" and res.steps == 41 and res.skipped == {}
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 38)]
    assert res.last.mfu == pytest.approx(0.312) and res.last.step_time_s == pytest.approx(0.150)


# KellerJordan/modded-nanogpt records/*/train_gpt2.py: print(f"step:{step+1}/{args.num_iterations}
# train_loss:{train_loss.item():.4f} train_time:{approx_time:.0f}ms step_avg:{approx_time/timed_steps:.2f}ms")
# and the validation line "step:{step}/{n} val_loss:{val_loss:.4f} train_time:..ms step_avg:..ms".
def test_modded_nanogpt_step_lines(tmp_path):
    lines = [f"step:{s}/3200 train_loss:{loss:.4f} train_time:{120 * s}ms step_avg:120.00ms"
             for s, loss in losses(40, spike_at=35).items()]
    lines.insert(20, "step:20/3200 val_loss:4.2000 train_time:2400ms step_avg:120.00ms")
    res = replay_file(write(tmp_path, "modded.log", "\n".join(lines) + "\n"))
    assert res.format == "text" and res.steps == 40 and res.skipped == {} and res.evaluations == 1
    assert [(e.rule, e.step) for e in res.events] == [("loss_spike", 35)]
    # train_time is the running total of training time (validation left out), step_avg its running mean: the step
    # time is train_time's difference over the steps since the line before
    assert res.last.step_time_s == pytest.approx(0.12)


# transformers src/transformers/trainer_callback.py: ProgressCallback makes tqdm(total=state.max_steps), updates it
# each step and writes str(logs) through it (PrinterCallback: print(logs)); tqdm separates its redraws with \r.
def test_hf_trainer_between_progress_bars(tmp_path):
    def bar(n):
        return f"{100 * n // 200:3d}%|#         | {n}/200 [00:{n // 60:02d}:{n % 60:02d}<00:50,  3.90it/s]"
    out = ""
    for s, loss in losses(60, spike_at=56).items():
        out += "\r" + bar(s)
        if s % 2 == 0:  # logging_steps=2
            out += "\r" + " " * 40 + "\r" + f"{{'loss': {loss:.4f}, 'grad_norm': 1.{s % 7}, 'learning_rate': 5e-05, " \
                   f"'epoch': {s / 200:.2f}}}\n"
    out += "\r" + " 50%|#####     | 5/10 [00:01<00:01,  4.00it/s]\n{'eval_loss': 2.3, 'epoch': 0.3}\n"
    out += "{'train_runtime': 100.0, 'train_samples_per_second': 3.0, 'train_loss': 2.1, 'epoch': 1.0}\n"
    res = replay_file(write(tmp_path, "hf.log", out))
    # the bars before the first dict are the log's first records (1, then 2, which the dict completes)
    assert res.format == "text" and res.steps == 31 and res.merged_lines == 1
    assert [(e.rule, e.step) for e in res.events] == [("loss_spike", 56)]  # the bar's count, not the 28th loss line
    assert res.skipped["summary or evaluation line"] == 1 and res.evaluations == 1 and res.skipped["progress bar"] == 59
    assert res.last.step == 60 and res.last.grad_norm == 1.4 and res.last.lr == 5e-05


# deepspeed/runtime/fp16/loss_scaler.py update_scale(): f"[deepspeed] OVERFLOW! Rank {rank} Skipping step."
# + f" Attempted loss scale: {int(cur_scale)}, reducing to {int(next_scale)}", logged right after tqdm's bar
# (as in a public Trainer+DeepSpeed log), and Exception("Current loss scale already at minimum - cannot
# decrease scale anymore. Exiting run.").
def test_a_log_of_tqdm_bars_alone_gives_step_records_timed_by_the_bars_elapsed_times(tmp_path):
    # tqdm itself writes the bars (its default smoothing), on a clock of ~2.8 s steps with a 300 s pause (an
    # evaluation, a checkpoint save) before step 201
    from tqdm import tqdm

    now = [0.0]
    out = io.StringIO()
    bar = tqdm(total=1752, file=out, mininterval=0)
    bar._time = lambda: now[0]
    bar.start_t = bar.last_print_t = 0.0
    for i in range(1, 401):
        now[0] += 2.8 + (0.1 if i % 3 else 0.0) + (300.0 if i == 201 else 0.0)
        bar.update(1)
    bar.close()
    res = replay_file(write(tmp_path, "bars.log", out.getvalue()))
    assert res.format == "text" and res.steps + res.merged_lines == 400  # 1..400, each a record
    # every record with a time says its mean over >= 10 s of bars within 10 %; one spans the pause
    from test_replay_text import read

    recs = [r for r in read(re.split("[\r\n]+", out.getvalue())) if isinstance(r, StepRecord)]
    times = sorted(r.step_time_s for r in recs if r.step_time_s is not None)
    assert len(times) >= 90 and 2.5 <= times[0] and times[-2] <= 3.2 and times[-1] > 70
    # the pause is one slow record, not the slow stretch tqdm's smoothed rate (65.85s/it, 46.93s/it, .. after it)
    # would draw (throughput_drop: the median of 10 steps below 70 % for 300 s)
    assert res.events == []


def test_bars_before_training_are_neither_its_records_nor_its_bar(tmp_path):
    # a Hugging Face Trainer log as tqdm writes it: the checkpoint shards' bar, a dataset's map, then the training
    # bar, a dict every 10 steps (logging_steps) through tqdm.write, an evaluation bar at step 30
    from tqdm import tqdm

    now, out = [0.0], io.StringIO()

    def bar(**kw):
        b = tqdm(file=out, mininterval=0, **kw)
        b._time = lambda: now[0]
        b.start_t = b.last_print_t = now[0]
        return b

    for total, step, kw in ((2, 1, {"desc": "Loading checkpoint shards"}),
                            (1000, 100, {"desc": "Map", "unit": " examples"})):
        b = bar(total=total, **kw)
        for _ in range(total // step):
            now[0] += 0.5
            b.update(step)
        b.close()
    train = bar(total=60)
    for s in range(1, 61):
        now[0] += 2.8
        train.update(1)
        if s % 10 == 0:
            train.write(str({"loss": round(2.0 - s / 100, 4), "learning_rate": 5e-05, "epoch": round(s / 60, 2)}),
                        file=out)
        if s == 30:
            ev = bar(total=5, leave=False)
            for _ in range(5):
                now[0] += 1
                ev.update(1)
            ev.close()
            train.write(str({"eval_loss": 1.9, "epoch": 0.5}), file=out)
    train.close()
    from test_replay_text import read

    recs = [r for r in read(re.split("[\r\n]+", out.getvalue())) if isinstance(r, StepRecord)]
    # the dicts at the training bar's counts; the training bar's own records before the first dict (a bar of
    # nothing but steps until then); none of the shards' or the map's
    assert [(r.step, r.loss) for r in recs if r.loss is not None] == [(10 * i, 2.0 - i / 10) for i in range(1, 7)]
    assert all(r.step < 10 and r.loss is None for r in recs if r.step % 10)
    res = replay_file(write(tmp_path, "hf.log", out.getvalue()))
    assert res.evaluations == 1 and res.events == []
    # ml-explore/mlx-examples issue #330's start (tests/data/reallogs/tune/mlx_cuda_healthy_330.log): a described
    # bar is no step
    assert [r.step for r in read(["Fetching 11 files: 100%|##########| 11/11 [00:00<00:00, 9.87it/s]",
                                  "Iter 10: Train loss 2.662, Learning Rate 1.000e-05"])] == [10]


def test_bars_described_by_a_headerless_row_of_values_are_steps_and_worded_ones_are_not(tmp_path):
    # YOLOv5's train.py sets its bar's description to the epoch's row of values (('%10s' * 2 + '%10.4g' * 5) %
    # (f'{epoch}/{epochs - 1}', mem, *mloss, targets, imgsz)); an excerpt pasted without the table's header row
    # is bars counting steps, their units glued to numbers
    from tqdm import tqdm

    from test_replay_text import read

    now, out = [0.0], io.StringIO()
    bar = tqdm(total=148, file=out, mininterval=0)
    bar._time = lambda: now[0]
    bar.start_t = bar.last_print_t = 0.0
    for i in range(1, 41):
        now[0] += 5.2
        bar.set_description(("%10s" * 2 + "%10.4g" * 5) % ("0/99", "21.5G", 0.07 - i / 1e4, 0.025, 0.0236, 24, 1280))
        bar.update(1)
    res = replay_file(write(tmp_path, "yolov5.log", out.getvalue()))
    assert res.format == "text" and res.steps + res.merged_lines == 40 and res.last.step == 40 and res.events == []
    recs = [r for r in read(re.split("[\r\n]+", out.getvalue())) if isinstance(r, StepRecord)]
    times = [r.step_time_s for r in recs if r.step_time_s is not None]  # (the bars' whole-second elapsed times)
    assert len(times) >= 15 and all(4.6 < t < 5.8 for t in times) and all(r.loss is None for r in recs)
    assert read([f"Loading 2 shards: {n * 50}%|#####     | {n}/2 [00:0{n}<00:01, 1.00s/it]" for n in (1, 2)]) == []


def test_hf_with_deepspeed_overflows_on_the_bar_line(tmp_path):
    def bar(n):
        return f" 14%|#4        | {n}/2724 [13:55:57<86:19:20, 132.41s/it]"

    def overflow(scale):
        return f"[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 " \
               f"Skipping step. Attempted loss scale: {scale}, reducing to {scale // 2}\n"
    text = (f"\r{bar(377)}\r{bar(378)}{overflow(64)}\r{bar(379)}{overflow(32)}\r{bar(380)}\r"
            "{'loss': 2.0491, 'learning_rate': 0.0001961913563176343, 'epoch': 0.28}\n"
            f"\r{bar(380)}{overflow(16)}\r{bar(381)}{overflow(8)}"
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n")
    res = replay_file(write(tmp_path, "hf_ds.log", text))
    # a bar alone before the dict: the record of its count (377); a bar with a message glued counts its step, the
    # message's record is the next one's (379, 380, then 381, 382); the dict completes step 380
    assert res.format == "text" and res.steps == 5 and res.merged_lines == 1
    # the overflows at 379..382 are not calibration (step 379 is not a start-up): a storm, then the scaler gives up
    assert [(e.rule, e.step, e.value) for e in res.events] == [("overflow_storm", 381, 3.0),
                                                                ("loss_scale_collapse", 382, 8.0)]
    assert [res.last.step, res.last.overflow, res.last.loss_scale] == [382, True, 8.0]


def test_deepspeed_minimum_scale_is_a_collapse_report(tmp_path):
    text = ("[2023-04-28 06:51:30,648] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
            "Skipping step. Attempted loss scale: 2, reducing to 1\n"
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n")
    res = replay_file(write(tmp_path, "ds.log", text))
    assert res.format == "text" and [(e.rule, e.step, e.value) for e in res.events] == \
        [("loss_scale_collapse", 1, 1.0), ("loss_scale_collapse", 1, 2.0)]  # the rule (scale set next: 1); the message


# JSONL: the names are read through the alias table the CSV reader uses (monitor/replay/fields.py).
def test_jsonl_named_fields_share_the_csv_aliases(tmp_path):
    from training_monitor.replay import fields

    assert csvlog.canonical is fields.canonical and text.lookup is fields.lookup
    rows = [f'{{"iteration": {s}, "train/loss": {loss if not math.isnan(loss) else "NaN"}, "learning_rate": 3e-4, '
            f'"grad-norm": 1.0}}' for s, loss in losses(30, nan_at=25).items()]
    rows[3] = '{"step": 4, "eval_loss": 2.0}'
    rows.append("not json at all")
    res = replay_file(write(tmp_path, "metrics.jsonl", "\n".join(rows) + "\n"))
    assert res.format == "text" and res.steps == 29
    assert res.skipped == {"no step fields": 1} and res.evaluations == 1
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 25)]
    assert res.last.lr == 3e-4 and res.last.grad_norm == 1.0


def test_a_csv_export_with_a_row_per_epoch_counts_its_rows_in_epochs(tmp_path):
    # synthetic rows under the headers Ultralytics' results.csv and Keras' CSVLogger write: no step column, the
    # epoch column counts the rows; the training loss parts (`train/box_loss` ..) are the loss, `val/..` not
    yolo = ("epoch,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),"
            "metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2\n"
            "1,1.2,2.3,1.4,0.5,0.6,0.7,0.4,1.1,2.2,1.3,0.01,0.01,0.01\n"
            "2,1.1,2.2,1.3,0.6,0.7,0.8,0.5,1.0,2.1,1.2,0.009,0.009,0.009\n"
            "3,nan,nan,nan,0,0,0,0,nan,nan,nan,0.008,0.008,0.008\n")
    res = replay_file(write(tmp_path, "results.csv", yolo))
    assert res.format == "csv" and res.steps == 3 and [(e.rule, e.step) for e in res.events] == [("nan_inf", 3)]
    keras = replay_file(write(tmp_path, "training.log", "epoch,loss,val_loss\n0,0.52,0.48\n1,0.41,0.40\n"))
    assert keras.format == "csv" and [(r.step, r.loss) for r in [keras.last]] == [(1, 0.41)]
    # a step column, where there is one, is the step (Lightning's metrics.csv: `..,global_step,epoch,..`)
    lightning = "tests/data/reallogs/tune/stablesr_lightning_csv_metrics_healthy_161.log"
    assert replay_file(str(Path(__file__).parent.parent / lightning)).last.step == 649


# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp WorkNCCL::checkTimeout(): logPrefix() + "Watchdog caught
# collective operation timeout: " + work + " ran for " + ms + " milliseconds before timing out." (lines as
# printed with PyTorch's [rankN]: prefix); Ascend CANN error codes EI0002 ("The wait execution of the Notify
# register times out.") and EI0006 ("Getting socket times out."), and the HCCL plog "wait socket establish
# timeout". They are read in any text format, here a MindFormers log.
def test_collective_timeouts_are_stall_reports(tmp_path):
    from test_replay import mf_log

    nccl = ("[rank{r}]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600061 milliseconds before timing out.\n")
    text = (mf_log(5) + nccl.format(r=0, seq=7753) + nccl.format(r=0, seq=7754) + nccl.format(r=3, seq=7753)
            + "EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times "
              "out. Reason: The Notify register has not received the Notify record from remote rank: [unknown]. "
              "group information: [group:[hccl_world_group], user define information[], rankSize[8], rankId[6].]\n"
            + "        Possible Cause: 1. An exception occurs during the execution on some NPUs in the cluster.\n"
            + "EI0006: [PID: 176930] 2025-07-01-00:40:04.135.732 Getting socket times out. Reason: Remote Rank did "
              "not send the data in time. Please check the reason for the rank being stuck\n")
    res = replay_file(write(tmp_path, "rank_5.log", text))
    assert res.format == "mindformers" and res.steps == 5
    stalls = [(e.rule, e.step, e.rank, e.value) for e in res.events]
    assert stalls == [("stall", 5, 0, 600.061), ("stall", 5, 3, 600.061), ("stall", 5, 6, None), ("stall", 5, 5, None)]
    assert res.skipped["repeated trainer message"] == 1  # rank 0's second pending collective
    assert "ALLREDUCE" in res.events[0].message and "EI0002" in res.events[2].message


def test_hccl_socket_wait_and_a_timeout_only_log(tmp_path):
    text = ("[ERROR] HCCL(3977573,all_reduce_test):2025-11-22-17:37:04.447.996 [hccl_socket_manager.cc:816] "
            "[3977663][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[2] timeout[120 s]\n")
    res = replay_file(write(tmp_path, "plog.log", text))  # no step lines at all: the fallback format reads it
    assert res.format == "text" and [(e.rule, e.rank, e.value) for e in res.events] == [("stall", 2, 120.0)]


# Hangs seen by PyTorch's NCCL heartbeat monitor and by the Ascend runtime, read in any text log (here a
# MindFormers log) and in a log of such lines only. Lines: hiyouga/LlamaFactory issue #8549 (the corpus file
# llamafactory_watchdog_stuck_streaming_8549.log), snowflakedb/ArcticTraining issue #219, modelscope/ms-swift
# issue #7992 (a time prefix); CANN EE1002 from hiyouga/LlamaFactory issue #5551 and Ascend/pytorch issue #48
# (torch_npu_ee1002_stream_sync_timeout_48.log), EH9999 task timeout from hiyouga/LlamaFactory issue #5347
# and Ascend/pytorch issue #43 (torch_npu_worker_eh9999_task_timeout_43.log), EH9999 fftsplus timeout from
# vllm-project/vllm-ascend issue #2800, EI9999 from Ascend/pytorch issue #43, EE9999 from vllm-ascend #14214.
STUCK = ("[rank{r}]:[E704 13:48:58.260494728 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
         "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
         "collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, "
         "and could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), "
         "or other deadlock-prone behaviors. \n")
EE1002 = ("EE1002: 2024-09-26-16:06:40.565.510 Stream synchronize timeout. rtDeviceSynchronize execute failed, "
          "reason=[stream sync timeout]\n"
          "        Possible Cause: 1. The timeout interval may be improperly set.\n"
          "        Solution: 1. Check whether the timeout interval is properly set. 2. Check whether the network is "
          "normal.\n")
EH9999 = ("worker-1: EH9999: Inner Error!\n"
          "worker-1:         rtDeviceSynchronize execute failed, reason=[task timeout][FUNC:FuncErrorReason]"
          "[FILE:error_message_manage.cc][LINE:53]\n"
          "worker-1: EH9999: 2024-07-03-11:28:40.451.641  wait for compute device to finish failed, runtime result = "
          "107020.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]\n")


def test_watchdog_stuck_and_ascend_runtime_timeouts_are_stall_reports(tmp_path):
    from test_replay import mf_log

    res = replay_file(write(tmp_path, "stuck.log", STUCK.format(r=2)))  # one line, no step line
    assert res.format == "text" and [(e.rule, e.step, e.rank, e.value) for e in res.events] == [("stall", 0, 2, 480.0)]
    assert "ProcessGroupNCCL's watchdog made no progress for 480 s" in res.events[0].message
    text = (mf_log(5) + STUCK.format(r=7)
            + "18:11:06.680 [rank4]:[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] [PG ID 12 PG GUID 99(EXPERT_"
              "MODEL_PARALLEL_GROUP) Rank 4] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making "
              "progress in monitoring enqueued collectives.\n")
    res = replay_file(write(tmp_path, "rank_0.log", text))
    assert res.format == "mindformers" and res.steps == 5
    assert [(e.rule, e.step, e.rank) for e in res.events] == [("stall", 5, 7), ("stall", 5, 4)]
    for name, lines, reason in (("ee1002.log", EE1002, "stream sync timeout"), ("eh9999.log", EH9999 * 3, "task timeout")):
        res = replay_file(write(tmp_path, name, lines))
        assert res.format == "text" and [(e.rule, e.step, e.value) for e in res.events] == [("stall", 0, None)]
        assert f"rtDeviceSynchronize failed: {reason}" in res.events[0].message
    text = (mf_log(3)
            + "EH9999: Inner Error!\n        rtStreamSynchronizeWithTimeout execute failed, reason=[fftsplus timeout]"
              "[FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]\n"
            + "worker-1: EI9999: 2024-07-03-11:28:40.419.527  The error from device(chipId:0, dieId:0), serial number is "
              "1, hccl fftsplus task timeout occurred during task execution, stream_id:4, sq_id:4, task_id:5, stuck "
              "notify num:7, timeout:1836.[FUNC:ProcessStarsHcclFftsPlusTimeoutErrorInfo][FILE:device_error_proc.cc]"
              "[LINE:1389]\n")
    res = replay_file(write(tmp_path, "rank_1.log", text))
    assert [(e.rule, e.step, e.value) for e in res.events] == [("stall", 3, None)]  # once per step and rank
    res = replay_file(write(tmp_path, "ee9999.log",
                            "EE9999[PID: 818] 2026-08-13-15:31:21.888.208 (EE9999):  The error from device(chipId:5, "
                            "dieId:0), serial number is 1, event wait timeout occurred during task execution, "
                            "stream_id:44, sq_id:5, task_id:61293, event_id=55, timeout=234s.[FUNC:ProcessStarsWait"
                            "TimeoutErrorInfo][FILE:device_error_proc.cc][LINE:1593]\n"))
    assert [(e.rule, e.value) for e in res.events] == [("stall", 234.0)]
    assert "event wait timeout during a device task" in res.events[0].message


# Ascend's silent-data-corruption check in CANN device logs, as grepped in mindspore-ai/docs
# tutorials/source_en/debug/sdc.md (NPU_ASD_ENABLE=1: the corpus file mindspore_ascend_silent_check_nan_grep.log;
# NPU_ASD_ENABLE=3: a `normal case` INFO line, then the nan): a nan or inf checked value is a nan_inf report at the
# step the line names; a normal case is nothing.
def test_silent_check_nan_is_reported_at_its_step(tmp_path):
    line = ("device-{d}/device-299066_20250225184036913.log:1968:[ERROR] AICPU(26533,aicpu_scheduler):2025-02-25-18:40:"
            "56.176.403 [silent_check_v3.cc:250][ComputeL1Error][tid:26552]SilentCheckV3 ComputeL1Error:val = [{v}], "
            "max = [nan], avg=[1.128970e-09], step=[{s}], c_thresh_l1 = [1.000000e+06], c_thresh_l2 = [1.000000e+04], "
            "beta1 = [9.900000e-01], npu_asd_detect = [1].\n")
    normal = ("device-2/device-311523_20250225184632284.log:1767:[INFO] AICPU(26559,aicpu_scheduler):2025-02-25-18:46:"
              "51.678.981 [silent_check_v3.cc:240][SilentCheck][tid:26572]SilentCheckV3 normal case, val=[3.350337e-08], "
              "max=[3.350337e-08], avg=[9.879098e-10], step=[4], c_threshold_l1=[1.000000e+06], c_threshold_l2=[1.000000e"
              "+04], beta1=[9.900000e-01], npu_asd_detect=[3].\n")
    text = normal + "".join(line.format(d=0, v=v, s=s) for v, s in (("nan", 5), ("nan", 6), ("nan", 6), ("inf", 7)))
    res = replay_file(write(tmp_path, "sdc.log", text))
    assert res.format == "text" and [(e.rule, e.step) for e in res.events] == [("nan_inf", 5), ("nan_inf", 6),
                                                                               ("nan_inf", 7)]
    assert "feature value is inf at step 7" in res.events[2].message
    with pytest.raises(ReplayError, match="no known training-log format"):
        replay_file(write(tmp_path, "normal.log", normal))


# MindData's own slowness warning (mindspore ccsrc data_queue_op.cc DetectPerBatchTime, generator_op.cc): a
# throughput_drop report at the last step done, when the step times show it: after a timed step, only when the next
# timed step took longer (data_queue_op.cc times a batch from the one before it, across the pause between two
# epochs, so the first batch after an evaluation or a checkpoint save warns too: the corpus file
# mindspore_r2plus1d_loss_monitor_warnings_eval_epochs_20_21.log); with no timed step before it, when the first timed
# step after it took over excursion_ratio (3) times the second (the corpus file mindspore_lpcnet_..: 779 then 482 ms
# a step, no event), or at the end when there is no second. Lines: a
# LossMonitor log of the finalMLP model (mindspore models README, research/recommend/final_mlp; its epoch 2 twice
# as fast, and with its time edited slower) and mindspore-ai/docs minddata_debug.md (the corpus file
# mindspore_minddata_bad_performance_slow_epoch.log).
def test_minddata_slowness_warning_is_a_throughput_report(tmp_path):
    warn = ("[WARNING] MD(2637547,7f5fbdffb700,python):2023-06-01-09:14:29.052.845 [mindspore/ccsrc/minddata/dataset/"
            "engine/datasetops/data_queue_op.cc:809] DetectPerBatchTime] Bad performance attention, it takes more than "
            "25 seconds to fetch a batch of data from dataset pipeline, which might result `GetNext` timeout problem. "
            "You may test dataset processing performance(with creating dataset iterator) and optimize it.\n")
    text = ("epoch: 1 step: 342, loss is 0.8634778261184692\n"
            "Train epoch time: 119160.997 ms, per step time: 348.424 ms\n" + warn + "\n"
            "epoch: 2 step: 342, loss is 0.47610682249069214\n"
            "Train epoch time: 60451.976 ms, per step time: 176.760 ms\n")
    res = replay_file(write(tmp_path, "final_mlp.log", text))  # epoch 2 ran faster: the pause between the epochs
    assert res.steps == 2 and res.events == [] and res.skipped["slowness report the step times do not show"] == 1
    slower = text.replace("per step time: 176.760 ms", "per step time: 420.760 ms")
    res = replay_file(write(tmp_path, "slower.log", slower))
    assert res.steps == 2 and [(e.rule, e.step, e.value) for e in res.events] == [("throughput_drop", 342, 25.0)]
    assert "more than 25 s to fetch a batch of data from dataset pipeline" in res.events[0].message
    gen = ("[WARNING] MD(90635,fffdf0ff91e0,python):2023-03-25-15:29:14.801.601 [mindspore/ccsrc/minddata/dataset/engine/"
           "datasetops/source/generator_op.cc:220] operator()] Bad performance attention, it takes more than 25 seconds "
           "to generator.__next__ new row, which might cause `GetNext` timeout problem when sink_mode=True.\n")
    res = replay_file(write(tmp_path, "gen.log", gen))
    assert [(e.rule, e.step) for e in res.events] == [("throughput_drop", 0)]
    assert "generator.__next__ new row" in res.events[0].message
    start = gen + ("epoch: 1 step: 5208, loss is 2.1261117458343506\n"
                   "Train epoch time: 4058282.103 ms, per step time: 779.240 ms\n"
                   "epoch: 2 step: 5208, loss is 2.1934659481048584\n"
                   "Train epoch time: 2512836.642 ms, per step time: 482.496 ms\n")
    res = replay_file(write(tmp_path, "start.log", start))  # a start 1.6x slower than the next epoch: no event
    assert res.steps == 2 and res.events == [] and res.skipped["slowness report the step times do not show"] == 1
    res = replay_file(write(tmp_path, "slow_start.log", start.replace("779.240 ms", "1779.240 ms")))
    assert [(e.rule, e.step) for e in res.events] == [("throughput_drop", 0)]


# fairseq's epoch summary prints the loss scale with three decimals: 0.000 is a scale fallen under 0.0005, i.e.
# to fairseq's minimum of 1e-4 (facebookresearch/fairseq issue #1529, the corpus file
# fairseq_loss_scale_zero_epoch_line_1529.log, titled "Minimum loss scale reached"); one summary at 1.000 (fairseq
# issue #506) is no collapse.
def test_fairseq_loss_scale_printed_as_zero_is_a_collapse(tmp_path):
    line = ("| epoch 028 | loss 3.976 | nll_loss 2.204 | ppl 4.61 | wps 279460 | ups 3 | wpb 110529.673 | bsz 3780.211 | "
            "num_updates 9165 | lr 0.000330319 | gnorm 0.635 | clip 0.000 | oom 0.000 | loss_scale 0.000 | wall 4043 | "
            "train_wall 3606\n")
    res = replay_file(write(tmp_path, "train.log", line))
    assert res.steps == 1 and [(e.rule, e.step, e.value) for e in res.events] == [("loss_scale_collapse", 9165, 0.0)]
    healthy = ("| epoch 079 | loss 3.536 | nll_loss 1.824 | ppl 3.54 | wps 418885 | ups 0.7 | wpb 606086 | bsz 20493 | "
               "num_updates 20077 | lr 0.000446355 | gnorm 0.234 | clip 0% | oom 0 | loss_scale 1.000 | wall 30390 | "
               "train_wall 29260\n")
    res = replay_file(write(tmp_path, "healthy.log", healthy))
    assert res.steps == 1 and res.events == []


# monitor/events.py EventLog: one JSON object per event (Event.to_dict(), NaN as "nan") plus the callback's
# {"action": "rollback"|"stop", ...} records (callbacks/training_monitor.py).
def test_own_event_log_is_re_reported(tmp_path):
    text = ('{"action": "rollback", "at_step": 151, "to_step": 125, "rank": 0, "time": 1.0}\n'
            '{"rule": "loss_spike", "step": 151, "onset_step": 149, "value": 4.28, "severity": "critical", '
            '"message": "loss 4.28 at step 151", "source": "rule", "actions": ["alert", "rollback"], "rank": 1, '
            '"runbook": "runbooks/loss_spike.md", "details": "", "time": 1.0}\n'
            '{"rule": "nan_inf", "step": 194, "onset_step": 194, "value": "nan", "severity": "critical", '
            '"message": "loss is nan at step 194", "source": "rule", "actions": [], "rank": 0, "runbook": "", '
            '"details": "", "trainer_step": 220, "time": 2.0}\n'
            '{"rule": "no_such_rule", "step": 1, "onset_step": 1, "value": null, "message": "x"}\n')
    res = replay_file(write(tmp_path, "events_rank0.jsonl", text))
    assert res.format == "events" and res.reports == 2
    assert [(e.rule, e.step, e.onset_step, e.rank, e.source) for e in res.events] == \
        [("loss_spike", 151, 149, 1, "rule"), ("nan_inf", 194, 194, 0, "rule")]
    assert math.isnan(res.events[1].value) and res.events[0].actions == ["alert", "rollback"]
    assert [e.trainer_step for e in res.events] == [None, 220]  # the trainer's number, after a rollback
    assert "loss is nan at step 194 (trainer step 220)" in as_text([res])
    assert res.skipped == {"rollback or stop record": 1, "unknown rule": 1}
    # what the live monitor did (a record short of the fields a rollback's words need: its fields)
    assert res.actions == ["rollback: at_step 151, to_step 125, rank 0"]
    # an event that asked for no rollback (the live monitor spared it: its step's update was skipped) asks for
    # none replayed: only rank 1's loss spike is a would-be rollback
    assert res.events[1].actions == ["alert"]
    assert [(rank, [rb["at_step"] for rb in p.rollbacks]) for rank, p in sorted(res.policies.items())] == \
        [(0, []), (1, [151])]


# The console log of a monitored MindSpore run (a tutorial's Model.train with LossMonitor and TrainingMonitor,
# `python train.py > out.log 2>&1`): the monitor's own event line on stderr is read as its report, at the step
# and onset it names (LossMonitor's line of the rolled-back step 151 is not printed).
def test_the_monitor_s_own_event_line_in_a_console_log_is_its_report(tmp_path):
    lines = ["epoch: 1 step: 149, loss is 1.0918482061995332", "epoch: 1 step: 150, loss is 1.0169424606097468",
             "2026-12-03 20:17:03.531 | ERROR    | training_monitor.sinks:on_event:77 - rank 0 nan_inf at step 151 "
             "(onset 151): loss is nan at step 151 -> alert, rollback",
             "2026-12-03 20:17:03.540 | WARNING  | training_monitor.callbacks.training_monitor:_rollback:537 - rank 0: "
             "rolled back from step 151 to healthy checkpoint at step 125 (monitor_output/checkpoints/rank_0/x/"
             "step_00000125.ckpt), LR x0.5", "epoch: 1 step: 152, loss is 1.0672640563573053"]
    stop = ("2026-12-04 21:18:12.143 | ERROR    | training_monitor.callbacks.training_monitor:_stop:697 - stopping the "
            "run: rollback budget exhausted: 2 rollbacks done (max_rollbacks=2); anomaly at step 152")
    res = replay_file(write(tmp_path, "out.log", "\n".join([*lines, stop]) + "\n"))
    assert [(e.rule, e.step, e.onset_step, e.source) for e in res.events] == [("nan_inf", 151, 151, "monitor")]
    assert res.events[0].message == "monitor: loss is nan at step 151"
    # it asks what the live monitor's line says it asked: a spike in the run's first steps only alerted (a 2-rank
    # msrun tutorial script's worker log, `LossMonitor(10)`: the trainer's lines do not show step 3)
    warm = ["epoch: 1 step: 10, loss is 1.5", "2026-12-07 13:02:11.101 | ERROR    | training_monitor.sinks:on_event:90 "
            "- rank 0 loss_spike at step 3 (onset 3): loss 48.83 at step 3 is 1.8x the median 27.16 of the 2 steps "
            "before; at the run's start (its first 10 steps): no rollback [this rank's own loss 66.1165] -> alert",
            "epoch: 1 step: 20, loss is 1.4"]
    early = replay_file(write(tmp_path, "warm.log", "\n".join(warm) + "\n"))
    assert [(e.rule, e.step, e.actions) for e in early.events] == [("loss_spike", 3, ["alert"])]
    assert early.would_be_rollbacks() == []
    # its lines of what it did are no steps (a stop's `anomaly at step 152` is no second record of step 152); they
    # are listed as what the live monitor did, beside what the rules would do
    assert (res.steps, res.skipped["rollback or stop record"]) == (3, 2)
    assert res.actions == [
        "rank 0: rolled back from step 151 to healthy checkpoint at step 125 (monitor_output/checkpoints/rank_0/x/"
        "step_00000125.ckpt), LR x0.5",
        "stopping the run: rollback budget exhausted: 2 rollbacks done (max_rollbacks=2); anomaly at step 152"]
    from training_monitor.replay.summary import as_dict, as_text
    assert f"the live monitor: {res.actions[0]}" in as_text([res])
    assert [a["action"] for a in as_dict([res])["live_actions"]] == res.actions
    # a rule with no actions in the rules file prints none after the arrow
    quiet = lines[:2] + ["2026-12-03 20:17:03.531 | WARNING  | training_monitor.sinks:on_event:77 - rank 0 low_mfu at step "
                         "150 (onset 141): MFU 4.3% below the floor 20% -> "]
    res = replay_file(write(tmp_path, "quiet.log", "\n".join(quiet) + "\n"))
    assert [(e.rule, e.step, e.onset_step) for e in res.events] == [("low_mfu", 150, 141)]
    # a NaN the rules find again on its step line, and a second event of the rule at that step from an earlier
    # onset (the weights check at a checkpoint's promotion, which the log's lines do not show): kept
    nan = lines[:2] + ["epoch: 1 step: 151, loss is nan", lines[2], lines[2].replace(
        "(onset 151): loss is nan at step 151 -> alert, rollback",
        "(onset 141): weights not finite at step 151 (checkpoint of step 150) -> alert, rollback")]
    res = replay_file(write(tmp_path, "nan.log", "\n".join(nan) + "\n"))
    assert [(e.rule, e.step, e.onset_step, e.source) for e in res.events] == [
        ("nan_inf", 151, 151, "rule"), ("nan_inf", 151, 141, "monitor")]


# TensorBoard event files, written with TensorBoard's own writers: tensorboard.summary.Writer (TF2-style scalar
# tensors; Megatron's and MindFormers' tag names, with their "vs samples" copies) and EventFileWriter with
# simple_value (tensorboardX / PyTorch style; Hugging Face's tag names).
def test_tensorboard_event_files(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary import Writer
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    run = tmp_path / "tb" / "rank_2"
    w = Writer(str(run))
    for s, loss in losses(40, spike_at=35).items():
        w.add_scalar("lm loss", loss, s)
        w.add_scalar("lm loss vs samples", loss, 8 * s)
        w.add_scalar("loss-scale", 65536.0, s)
        w.add_scalar("grad-norm", 1.5, s)
        w.add_scalar("learning-rate", 1e-4, s)
        w.add_scalar("iteration-time", 0.3, s)
    w.close()
    hf_dir = tmp_path / "hf"
    fw = EventFileWriter(str(hf_dir))
    for s, loss in losses(30, nan_at=22).items():
        values = [summary_pb2.Summary.Value(tag=t, simple_value=v)
                  for t, v in (("train/loss", loss), ("train/grad_norm", 2.0), ("train/learning_rate", 5e-5),
                               ("train/epoch", s / 30))]
        fw.add_event(event_pb2.Event(step=s, wall_time=1700000000.0 + s, summary=summary_pb2.Summary(value=values)))
    fw.close()
    megatron_res, hf_res = replay_paths([str(tmp_path / "tb"), str(hf_dir)])
    assert megatron_res.format == "tensorboard" and megatron_res.steps == 40 and megatron_res.ranks == {2}
    assert megatron_res.skipped == {"other tag": 41}  # the file_version event and the 40 "vs samples" copies
    assert [(e.rule, e.step) for e in megatron_res.events] == [("loss_spike", 35)]
    last = megatron_res.last
    assert (last.loss_scale, last.grad_norm, last.lr, last.step_time_s) == (65536.0, 1.5, pytest.approx(1e-4),
                                                                              pytest.approx(0.3))
    assert hf_res.steps == 30 and [(e.rule, e.step) for e in hf_res.events] == [("nan_inf", 22)]
    assert hf_res.last.timestamp == 1700000030.0


def test_tensorboard_file_under_another_name_is_recognised_by_content(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.summary import Writer

    w = Writer(str(tmp_path / "tb"))
    for s, loss in losses(5).items():
        w.add_scalar("loss", loss, s)
    w.close()
    renamed = tmp_path / "run.bin"
    next((tmp_path / "tb").iterdir()).rename(renamed)
    res = replay_file(str(renamed))
    assert res.format == "tensorboard" and res.steps == 5


def test_tensorboard_missing_package_says_what_to_install(tmp_path, monkeypatch):
    import sys

    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00brain.Event:2")
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_file_loader", None)
    with pytest.raises(ReplayError, match=r"pip install 'training-monitor\[replay\]'"):
        replay_file(str(path))


def test_every_parser_keeps_the_feed_contract():
    """feed() gives a record, a report tuple, or None with the reason in ``parser.reason``."""
    from training_monitor.replay import PARSERS

    for name, mod in PARSERS.items():
        p = mod.Parser()
        for line in ("", "   \n", "hello world\n", "{'loss': 1.0}\n", '{"step": 1, "loss": 2}\n', "step,loss\n"):
            item = p.feed(line) if name != "tensorboard" else p.feed("other tag")
            assert item is None and p.reason or isinstance(item, (StepRecord, Report, tuple)), (name, line)
    assert text.Parser().feed("{'loss': 2.5, 'learning_rate': 1e-05, 'epoch': 0.1}").step == 1


def test_rules_file_turning_a_rule_off_drops_its_trainer_reports(tmp_path):
    from test_replay import DATA

    rules = Rules({"grad_norm_spike": {"enabled": False}})
    res = replay_file(str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log"), rules)
    assert res.events == [] and res.skipped["rule disabled"] == 2


def test_mindformers_one_match_reading_of_the_1x_step_line_is_the_general_reading():
    # the 1.3+ step line is read in C (monitor/replay/scan.pyx, the fast path) when its numbers are plain
    # decimals; any other shape or number, field by field: both readings agree
    import random

    from training_monitor.replay import mindformers
    from training_monitor.replay.scan import fast_record

    rng = random.Random(0)
    numbers = ["10.649", "2.0", "0.0", "-0.0", "nan", "inf", "1e-05", "9.981987e-06", "65536.0", "1_0", " 3.5"]
    for _ in range(2000):
        epochs, per_epoch = rng.randint(1, 3), rng.randint(1, 99999)
        epoch, step = rng.randint(1, epochs), rng.randint(1, per_epoch)
        loss, lr, scale, norm = (rng.choice(numbers).strip() for _ in range(4))
        norm = rng.choice([norm, ""])
        line = (f"2025-04-07 15:34:29,173 - [mindformers/core/callback/callback.py:529] - INFO - {{ Epoch:[{epoch:3d}/"
                f"{epochs:3d}], step:[{step:5d}/{per_epoch:5d}], loss: {loss}, per_step_time: {rng.randint(0, 10 ** 6)}ms,"
                f" lr: {lr}, overflow cond: {rng.choice(['True', 'False'])}, loss_scale: {scale}, global_norm: "
                f"[{norm}], train_throughput_per_npu: 2.896T")
        fast, general = mindformers.Parser(3), mindformers.Parser(3)
        fast.last = general.last = StepRecord(rng.randint(0, 300000))
        want = general._record(line, mindformers._STEP.search(line))
        assert repr(fast.parse(line)) == repr(want), line
        quick = fast_record(line, fast.last, 3)
        assert (quick is None) == any(n in ("nan", "inf", "1_0") for n in (loss, lr, scale, norm)), line
        assert quick is None or repr(quick) == repr(want), line


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.from_regex(r"\A[+-]?([0-9]{1,25}\.?[0-9]{0,25}|\.[0-9]{1,25})([eE][+-]?[0-9]{1,4})?\Z"))
def test_the_fast_path_reads_every_decimal_as_python_does(text):
    # the C reader's fast conversion (<= 15 digits, |exponent| <= 22) and its fallback give float(text),
    # to the bit (the sign of zero included)
    from training_monitor.replay.scan import fast_record

    line = (f"{{ Epoch:[  1/  1], step:[    1/   10], loss: {text}, per_step_time: 5ms, lr: {text}, overflow cond: "
            f"False, loss_scale: {text}, global_norm: [{text}], train_throughput_per_npu: 2.896T")
    rec = fast_record(line, None, 0)
    assert [repr(v) for v in (rec.loss, rec.lr, rec.loss_scale, rec.grad_norm)] == [repr(float(text))] * 4


def test_a_log_the_vote_gives_a_trainer_s_format_but_its_reader_cannot_read_is_read_as_text(tmp_path):
    # MindSpore's GAN tutorial (mindspore-ai/docs @9e844dc6 tutorials/source_en/generative/gan.md lines 360-379):
    # MFLossMonitor-like `Epoch:[..], step:[..]` lines, with the losses of two networks
    log = tmp_path / "gan.log"
    log.write_text("Epoch:[  0/200], step:[   0/ 468], loss_d:1.383930 , loss_g:0.693423 , time:0.864688s, lr:0.000200\n"
                   "Epoch:[  0/200], step:[  10/ 468], loss_d:1.356453 , loss_g:0.548430 , time:0.122673s, lr:0.000200\n"
                   "Epoch:[  0/200], step:[  20/ 468], loss_d:1.386923 , loss_g:0.628228 , time:0.120677s, lr:0.000200\n")
    res = replay_file(str(log))
    assert res.format == "text" and res.steps == 3
    with pytest.raises(ReplayError, match="no mindformers step lines"):
        replay_file(str(log), fmt="mindformers")  # a format asked for is not second-guessed



# deepinsight/insightface issue #1555 (arcface_torch) and auroua/InsightFace_TF issue #59, as printed (tune/ files)
def test_a_nan_before_a_column_gap_and_a_value_with_a_rate_unit():
    arcface = ["Training: 2021-06-01 16:25:07,307-Speed 218.93 samples/sec   Loss 2.4868   Epoch: 0   Global Step: "
               "14700   Required: 102 hours",
               "Training: 2021-06-01 16:25:51,183-Speed 218.82 samples/sec   Loss nan   Epoch: 0   Global Step: 14750"
               "   Required: 102 hours"]
    p = text.Parser()
    recs = [p.feed(line) for line in arcface]
    assert [r.step for r in recs] == [14700, 14750] and recs[0].loss == 2.4868 and math.isnan(recs[1].loss)
    assert ("nan_iterations", "0", None, None) in text.pairs("number of nan iterations:   0 |")  # a name's word
    tf = ("epoch 0, total_step 920, total loss is 16637847666688.00 , inference loss is 1.30, weight deacy loss is "
          "16637847666688.00, training accuracy is 0.796875, lr is 0.000300, time 125.331 samples/sec, total_time "
          "0.510646")
    assert ("step_time_s", "125.331", None, None) not in text.pairs(text.clean(tf))  # a rate: samples/sec
    assert ("sps", "125.331", None, None) in text.pairs(text.clean(tf))
