"""The generic text reader (monitor/replay/text.py) on real log excerpts (tests/data, copied from the shared
samples), and the same real lines decorated, hard-wrapped and with trainer messages put anywhere in them."""
import math
import re
from pathlib import Path

import pytest

from training_monitor.engine import Engine
from training_monitor.record import StepRecord
from training_monitor.replay import replay_file, text
from training_monitor.replay.base import Evaluation, Report
from training_monitor.ruleset import Rules

DATA = Path(__file__).parent / "data"


def read(lines, parser=None, evaluations=False):
    """Every record and report a parser makes of ``lines`` (records as they stand at the end), those it gives after
    a line's item too (as the runner takes them); with ``evaluations``, its evaluations too (those a step line holds
    after its record)."""
    parser = parser or text.Parser()
    out = []
    kinds = (StepRecord, Report, Evaluation) if evaluations else (StepRecord, Report)
    for line in lines:
        for item in [parser.feed(line), *parser.after]:
            parser.after = []
            if isinstance(item, kinds):
                if parser.absorbs:  # a step line took over the record an overflow message made
                    parser.absorbs = False
                    out.pop()
                out.append(item)
    return out


def rows(items):
    """Comparable rows of records and reports (NaN as text)."""
    def shown(v):
        return "nan" if isinstance(v, float) and math.isnan(v) else v
    return [tuple(shown(v) for v in (r.step, r.loss, r.grad_norm, r.loss_scale, r.overflow, r.lr, r.step_time_s, r.mfu))
            if isinstance(r, StepRecord) else (r.rule, r.step) for r in items]


def sample(name):
    return (DATA / name).read_text(encoding="utf-8").splitlines(True)


# --- the excerpts: steps, values and trainer messages read as a careful reader reads them ----------------------

def test_custom_loops_and_the_mindspore_ecosystem():
    minimind = replay_file(str(DATA / "custom-minimind_healthy_36.log"))  # Epoch:[0/19](N/24681) loss: lr:
    assert minimind.format == "text" and minimind.steps == 20 and minimind.events == []
    assert (minimind.last.step, minimind.last.loss) == (1900, 2.744)  # the last line is cut after its loss
    msrun = replay_file(str(DATA / "mindspore-msrun_healthy_29.log"))  # epoch: 0, step: N, loss is X
    assert msrun.steps == 10 and msrun.events == [] and msrun.last.step == 90
    assert msrun.skipped == {"no step fields": 1}
    ppasr = replay_file(str(DATA / "custom_nan_33.log"))  # Train epoch: 0, batch: N/34799, loss: .. train time: 4.3s
    assert ppasr.steps == 9 and ppasr.skipped == {"no step fields": 8}  # the Chinese "saved" lines
    assert [(e.rule, e.step) for e in ppasr.events][0] == ("nan_inf", 790)
    assert rows(read(sample("custom_nan_33.log"))[:1]) == [(750, 6.70559, None, None, None, 0.0001, 4.319, None)]


def test_mindocr_summary_collector_warnings_are_a_nan_report_at_the_step_logged_next():
    res = replay_file(str(DATA / "mindocr_nan_31.log"))
    assert res.steps == 1 and res.reports == 1 and res.skipped == {"repeated trainer message": 4}
    assert res.lines == 6 and res.last.step == 100 and math.isnan(res.last.loss)  # epoch: [1/3] step: [100/1000]
    trainer = [e for e in res.events if e.source == "trainer"]
    assert [(e.rule, e.step) for e in trainer] == [("nan_inf", 100)] and "no valid values" in trainer[0].message


def test_nanogpt_quoted_lines_and_torchtitan_rank_prefixes():
    nano = read(sample("nanogpt_nan_14.log"))  # "> 2023-03-22 09:30:39 iter 2920: loss 3.9883, time 1099.34ms, .."
    assert rows(nano[:1]) == [(2920, 3.9883, None, None, None, None, pytest.approx(1.09934), 0.1534)]
    assert [r.step for r in nano] == list(range(2920, 3080, 10)) and math.isnan(nano[9].loss)
    assert nano[8].step_time_s == pytest.approx(35.39233)  # iter 3000 holds the eval; "step 3000: .. val loss": none
    titan = read(sample("torchtitan_healthy_17.log"))  # [rank0]:[titan] .. step: 200  loss:  6.1384 .. mfu: 34.29%
    assert [(r.step, r.loss, r.mfu) for r in titan][:2] == [(200, 6.1384, 0.3429), (210, 6.0388, 0.3275)]
    assert replay_file(str(DATA / "torchtitan_healthy_17.log")).skipped == \
        {"no step fields": 3, "step line without loss": 1}  # GC lines; "Dumping profiler traces at step 200"


def test_olmo_multi_line_metric_blocks_complete_their_step():
    res = replay_file(str(DATA / "olmo_loss_zero_18.log"))
    assert res.steps == 3 and res.last.step == 3
    assert (res.last.loss, res.last.grad_norm) == (0.0, 7.725906669975302e-08)
    recs = read(sample("olmo_loss_zero_18.log"))
    assert [(r.step, r.loss, r.grad_norm) for r in recs] == [(1, 12.18, 231.7), (2, 1.7872662283480167e-06, 0.0002),
                                                              (3, 0.0, 7.725906669975302e-08)]
    assert [r.tokens for r in recs] == [None, 1048576, 1048576]  # differences of the running total_tokens


def test_colossalai_found_inf_marks_the_step_of_the_bar_line_that_follows():
    # rich wraps "WARNING: found" / "inf during ShardedOptimV2 step" over two lines; the bar line after it
    # (tqdm count 431, postfix loss=nan) is that step
    res = replay_file(str(DATA / "colossalai_found_inf_nan_24.log"))
    assert res.steps == 3 and res.merged_lines == 3  # each message's record taken over by its step's bar line
    recs = read(sample("colossalai_found_inf_nan_24.log"))
    assert [(r.step, r.overflow, r.lr) for r in recs] == [(431, True, 2.5e-05), (432, True, 2.5e-05),
                                                          (433, True, 2.5e-05)]
    assert all(math.isnan(r.loss) for r in recs)
    assert [(e.rule, e.step) for e in res.events][0] == ("nan_inf", 431)


def test_deepspeed_overflows_behind_tqdm_bars_and_fairseq_warnings():
    ds = read(sample("deepspeed_overflow_collapse_07.log"))  # "  0%| | 32/63645 [..][date] [INFO] .. OVERFLOW! .."
    assert [(r.step, r.overflow, r.loss_scale) for r in ds][:3] == [(33, True, 2.0), (34, True, 1.0), (35, True, 1.0)]
    fairseq = read(sample("fairseq_min_loss_scale_10.log"))
    # num_updates; gnorm; ups 0.4 (updates per second): a step time of 2.5 s
    assert rows(fairseq[:1]) == [(10198, 6.343, 0.39, 0.5, None, 0.000626286, 2.5, None)]
    assert [(r.step, r.overflow, r.loss_scale) for r in fairseq[1:]] == \
        [(10198 + i, True, 0.5 / 2 ** i) for i in range(1, 13)]  # "setting loss scale to: X", the new scale


# --- decorations, hard wraps, messages anywhere ----------------------------------------------------------------

STEP_LINES = [line for name in ("megatron_ds_tr1_13b_spike_lossscale_01.log", "custom_nan_33.log",
                                "torchtitan_healthy_17.log", "mindspore-msrun_healthy_29.log",
                                "custom-minimind_healthy_36.log", "fairseq_min_loss_scale_10.log")
              for line in sample(name)]
DECORATIONS = {
    "ANSI colours": lambda i, s: f"\x1b[32m{s[:10]}\x1b[0m\x1b[1m{s[10:]}\x1b[0m",
    "quoting": lambda i, s: "> " + s,
    "quoting twice": lambda i, s: "> > " + s,
    "viewer line numbers": lambda i, s: f"[{1763 + i}] {s}",
    "rank prefix": lambda i, s: f"[rank3]:{s}",
    "time stamp": lambda i, s: f"[2024-03-07 06:40:{i % 60:02d},123] {s}",
    "all of them": lambda i, s: f"> [{i}] [rank0]:2024-03-07 06:40:10.569 \x1b[33m{s}\x1b[0m",
    # loggers' prefixes: their sources ('train:12' is no training loss of 12), a time of day alone
    "loguru": lambda i, s: f"2024-03-07 06:40:10.569 | INFO     | __main__:train:{12 + i} - {s}",
    "loguru, a module": lambda i, s: f"2024-03-07 06:40:10.569 | INFO     | trainer:train:{12 + i} - {s}",
    "hydra": lambda i, s: f"[2024-03-07 06:40:10,569][__main__][INFO] - {s}",
    "glog": lambda i, s: f"I0307 06:40:10.569123 140245 train.py:{88 + i}] {s}",
    "logging's source": lambda i, s: f"2024-03-07 06:40:10,569 - [pkg/train.py:{i}] - INFO - {s}",
    "time of day": lambda i, s: f"[06:40:{i % 60:02d}] {s}",
    "day and month's name": lambda i, s: f"12 Nov 21:{i % 60:02d}    INFO  {s}",  # RecBole's `%d %b %H:%M`
}


@pytest.mark.parametrize("how", DECORATIONS)
def test_decorated_lines_give_the_same_records(how):
    plain = rows(read(STEP_LINES))
    decorated = [DECORATIONS[how](i, line.rstrip("\n")) + "\n" for i, line in enumerate(STEP_LINES)]
    assert rows(read(decorated)) == plain and len(plain) == 66


def wrap(line: str, width: int, lose_space: bool) -> list[str]:
    """``line`` hard-wrapped at ``width`` characters; with ``lose_space`` a space at a cut is dropped."""
    out, rest = [], line
    while len(rest) > width:
        head, rest = rest[:width], rest[width:]
        if lose_space and rest.startswith(" "):
            rest = rest[1:]
        out.append(head + "\n")
    return out + [rest + "\n"]


@pytest.mark.parametrize("width", [40, 57, 80, 113])
@pytest.mark.parametrize("lose_space", [False, True])
def test_hard_wrapped_step_lines_are_read_whole(width, lose_space):
    for name, mark in (("megatron_ds_tr1_13b_spike_lossscale_01.log", "iteration"), ("custom_nan_33.log", "batch"),
                       ("mindspore-msrun_healthy_29.log", "loss")):
        lines = [line.rstrip("\n") for line in sample(name) if mark in line]
        plain = rows(read(line + "\n" for line in lines))
        wrapped = [piece for line in lines for piece in wrap(line, width, lose_space)]
        assert rows(read(wrapped)) == plain and len(plain) >= 8, name


MESSAGES = [  # each trainer's own words, as printed (see monitor/replay/messages.py)
    ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1024, reducing to 512", 1024.0),
    ("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 512.0", 512.0),
    ("| WARNING: overflow detected, setting loss scale to: 512.0", 512.0),
    # OFA-Sys/OFA issue #108 (fairseq's trainer)
    ("NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 512.0", 512.0),
    # PaddlePaddle/PaddleOCR issue #10874 (PaddlePaddle's AMP scaler: the scale it ran with)
    ("Found inf or nan, current scale is: 1024.0, decrease to: 1024.0*0.5", 1024.0),
    ("overflow, still update, loss scale adjust to 512.0", 512.0),
    ("WARNING: found inf during ShardedOptimV2 step", None),
    # hpcaitech/ColossalAI issue #3069, description (zero_optimizer.py:218 step, rich's logging columns)
    ("INFO     colossalai - colossalai - INFO: Found overflow. Skip step", None),
]
PLACES = {
    "alone": lambda m: m,
    "after a tqdm bar": lambda m: f" 14%|#4        | 40/2724 [13:55:57<86:19:20, 132.41s/it]{m}",
    "behind quoting and line numbers": lambda m: f"> [1763] {m}",
    "behind a logger prefix": lambda m: f"[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] {m}",
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("message, scale", MESSAGES)
def test_overflow_messages_anywhere_mark_the_step_after_the_last_one(message, scale, place):
    steps = [f"step: {s}  loss: {3.0 - s / 100:.4f}  grad_norm: 1.5" for s in range(38, 41)]
    out = read([*steps, PLACES[place](message), "step: 41  loss: 2.5900  grad_norm: inf"])
    assert [r.step for r in out] == [38, 39, 40, 41]  # the message's record taken over by step 41's line
    assert (out[-1].overflow, out[-1].loss_scale, out[-1].loss) == (True, scale, 2.59)
    assert [r.overflow for r in out[:-1]] == [None] * 3  # before the message: unknown


def test_the_scale_a_message_announced_is_no_second_overflow_on_the_next_line():
    # the overflowed step's line prints the scale it ran with, the message the halved one the next line shows
    steps = [f"Step {s} | loss 2.{s} | loss_scale {131072.0 if s == 41 else 65536.0}" for s in range(38, 45)]
    message = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 65536.0"
    out = read([*steps[:3], message, *steps[3:]])
    assert [(r.step, r.overflow) for r in out[3:]] == [(41, True), (42, False), (43, False), (44, False)]
    # without the message, the fall is all there is to say an overflow happened: unknown, not clean
    assert [(r.step, r.overflow) for r in read(steps)[3:]] == [(41, None), (42, None), (43, None), (44, None)]


def test_overflow_messages_inside_a_logged_interval_mark_the_next_iteration_line():
    # Megatron-DeepSpeed logs every 10 iterations; DeepSpeed's messages in between belong to the next line's interval
    its = [line for line in sample("megatron_ds_tr1_13b_spike_lossscale_01.log") if "iteration" in line]
    ds = "[2022-05-01 10:00:00,000] [INFO] [stage_1_and_2.py:1656:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. " \
         "Attempted loss scale: 65536.0, reducing to 32768.0\n"
    out = read([its[0], its[1], ds, ds, its[2]])
    assert [(r.step, r.overflow) for r in out] == [(29020, False), (29030, False), (29040, None)]


def test_a_wrapped_trainer_message_is_read_across_the_wrap():
    out = read(["step: 7  loss: 2.0000\n", "WARNING  colossalai - ShardedOptimizerV2 - WARNING: found   \n",
                "                             inf during ShardedOptimV2 step   \n", "step: 8  loss: nan\n"])
    assert [(r.step, r.overflow) for r in out] == [(7, None), (8, True)]


# PyTorch's NCCL heartbeat monitor, as printed in snowflakedb/ArcticTraining issue #219 (description)
STUCK = ("[rank7]:[E626 05:14:36.393067540 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 7] "
         "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
         "collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, "
         "and could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), "
         "or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout "
         "would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or "
         "disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free "
         "to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to "
         "debug the hang. ")


@pytest.mark.parametrize("width", [None, 60, 80, 120, 150])
def test_a_stuck_nccl_watchdog_is_a_stall_of_its_rank_however_the_message_is_wrapped(width):
    lines = [STUCK + "\n"] if width is None else wrap(STUCK, width, False)
    (stall,) = [r for r in read(["step: 7  loss: 2.0000\n", *lines]) if isinstance(r, Report)]
    assert (stall.rule, stall.step, stall.value, stall.rank) == ("stall", 7, 480.0, 7)


def test_the_wrapped_watchdog_message_of_a_real_paste_is_read():
    # om-ai-lab/VLM-R1 issue #257: the same message hard-wrapped at 120 columns, the wrap cutting
    # "ProcessGroupNCCL'" from "s watchdog"; a log with no step line at all is read for it
    res = replay_file(str(DATA / "reallogs" / "tune" / "nccl_wrapped_watchdog_stuck_vlmr1_257.log"))
    assert [(a["rule"], a["value"], a["rank"]) for a in res.to_dict()["anomalies"]] == [("stall", 480.0, 6)]


def test_a_message_split_over_three_lines_is_read_at_its_mark():
    # huggingface/open-r1 issue #620 (turn 0): a web copy wrapped at 140 columns, the watchdog timeout over three
    # lines; the mark "Watchdog caught" is whole on the first, the time on the second: a stall at the mark
    lines = ["[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: [Rank 1] "
             "Watchdog caught collective opera\n",
             "tion timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran "
             "for 1800010 milliseconds before ti\n", "ming out.\n"]
    out = read(["step: 7  loss: 2.0000\n", *lines])
    assert [(r.rule, r.step, r.rank) for r in out if isinstance(r, Report)] == [("stall", 7, 1)]


def test_a_validation_loss_several_times_the_earlier_ones_is_an_eval_loss_spike():
    # NVIDIA/apex issue #493 (a Tacotron-style loop, tune/apex_val_loss_spike_overflow_493.log): the validation
    # loss 0.148 -> 0.712 after eight overflows; "Validation loss 8416:" names the iteration
    res = replay_file(str(DATA / "reallogs" / "tune" / "apex_val_loss_spike_overflow_493.log"))
    spikes = [a for a in res.to_dict()["anomalies"] if a["rule"] == "eval_loss_spike"]
    assert [(a["step"], a["onset_step"], round(a["value"], 6)) for a in spikes] == [(8416, 8416, 0.71172)]
    assert "4.8x the median 0.1483 of the 4 evaluations before" in spikes[0]["message"]


def _evaluations(lines):
    """The events the engine raises on the evaluations the text reader reads in ``lines``."""
    engine = Engine()
    return [(e.rule, e.step) for r in read(lines, evaluations=True) if isinstance(r, Evaluation)
            for e in engine.evaluate(*r[:3])]


def test_an_evaluation_loss_that_rises_slowly_or_wobbles_is_no_spike():
    # overfitting: Megatron-LM's GPT-2 345M sample (tune/megatron_lm_gpt2_345m_normal_01.log) evaluates
    # 6.44, 6.19, 6.83, 7.61, 8.21 while its training loss falls; here in mlx-lm's shape (tune/mlx_cuda_healthy_330)
    rising = [f"Iter {1000 * i}: Val loss {x}, Val took 5.265s\n" for i, x in
              enumerate((6.439, 6.189, 6.826, 7.610, 8.209), 1)]
    assert _evaluations(rising) == []
    # and a first evaluation far above the next ones (the start of training) is history, not a spike
    assert _evaluations(["{'eval_loss': 9.1, 'epoch': 0.1}\n", "{'eval_loss': 2.3, 'epoch': 0.2}\n",
                         "{'eval_loss': 2.2, 'epoch': 0.3}\n"]) == []
    assert _evaluations(["{'eval_loss': 2.3, 'epoch': 0.2}\n", "{'eval_loss': 2.2, 'epoch': 0.3}\n",
                         "{'eval_loss': 7.4, 'epoch': 0.4}\n"]) == [("eval_loss_spike", 0)]  # no step read: after step 0
    # the training loss windows never see them: the step lines' loss stays the training loss
    recs = read(["step 1 | loss 2.0\n", "step 2 | loss 2.1\n", "step 2: val loss 9.0\n", "step 3 | loss 2.0\n"],
                evaluations=True)
    assert [(type(r).__name__, r.step, r.loss) for r in recs] == [
        ("StepRecord", 1, 2.0), ("StepRecord", 2, 2.1), ("Evaluation", 2, 9.0), ("StepRecord", 3, 2.0)]
    # a line that begins with `Val` is an evaluation's, its names padded to the training line's width or not
    # (heldout53/custom_speedtransformer_..: `Val   Loss: nan` under `Train Loss: 3.2558`)
    recs = read(["[Epoch 1/50]\n", "Train Loss: 3.2327, Train Acc: 0.3183\n", "Val   Loss: 2.2890, Val   Acc: 0.5692\n",
                 "[Epoch 2/50]\n", "Train Loss: 3.1928, Train Acc: 0.3248\n", "Val   Loss: nan, Val   Acc: 0.0379\n"],
                evaluations=True)
    assert [(type(r).__name__, r.step, str(r.loss)) for r in recs] == [
        ("StepRecord", 1, "3.2327"), ("Evaluation", 1, "2.289"), ("StepRecord", 2, "3.1928"), ("Evaluation", 2, "nan")]


def test_what_is_not_a_training_step():
    assert [r.step for r in read(["step 499 | loss 2.2\n", "step 500: train loss 2.1, val loss 2.3\n",
                                  "{'eval_loss': 2.3, 'epoch': 0.3}\n",
                 "| epoch 027 | valid on 'valid' subset | valid_loss 8.30118 | num_updates 10198\n",
                 "Eval result: epoch 3, metrics: {'acc': 0.9}\n",
                 "{'train_runtime': 100.0, 'train_loss': 2.1, 'epoch': 1.0}\n",
                 "number of nan iterations in the report\n", "saving checkpoint to out\n"])] == [499]
    # a log whose step lines carry the validation loss too (nanoVLM): they are its step lines
    assert [(r.step, r.loss) for r in read(["Step: 0, Loss: 2.5, Val Loss: 2.6, Tokens/s: 37.10\n",
                                            "Step: 20, Loss: 2.4, Val Loss: 2.5, Tokens/s: 900.86\n"])] == \
        [(0, 2.5), (20, 2.4)]
    p = text.Parser()
    p.feed("{'loss': 2.5, 'epoch': 0.1}")
    assert p.feed("{'loss': 2.4, 'epoch': 0.1}").step == 2  # no step numbers in the log: the next step
    p = text.Parser()
    p.feed("step 5 | loss 2.5")
    assert p.feed("avg loss: 2.4") is None and p.reason == "summary or evaluation line"  # numbered log: a summary


def test_no_step_and_loss_numbers_is_an_unknown_format(tmp_path):
    from training_monitor.replay import ReplayError

    path = tmp_path / "notes.log"
    path.write_text("restarted at step 300 by hand\nloading 12 shards\n")
    with pytest.raises(ReplayError, match=re.escape(f"{path}: no known training-log format: no step with a loss")):
        replay_file(str(path))


def test_steps_with_a_grad_norm_alone_are_a_training_log(tmp_path):
    # gluon-nlp's SQuAD lines name their losses `Loss span/answer/total=0.77/0.18/0.95` (not read); the step, LR and
    # grad norm are: a log of such records is a training log, judged by the grad-norm rules
    path = tmp_path / "gnorm.log"
    path.write_text("".join(f"Epoch: 1, Batch: {s}/8164, LR=0.0000187, grad_norm={g}\n"
                            for s, g in ((3900, 21.6), (4200, 20.0), (4500, 30.4))))
    res = replay_file(str(path))
    assert (res.format, res.steps, res.events) == ("text", 3, [])


def test_a_hard_wrapped_line_of_a_torchrun_worker_stays_with_its_rank(tmp_path):
    # torchrun --tee prefixes a worker's lines with [defaultN]:; a copy wrapped at 150 characters leaves the rest
    # of each line without it
    lines = [line.rstrip("\n") for line in sample("megatron_ds_tr1_13b_spike_lossscale_01.log") if "iteration" in line]
    path = tmp_path / "tee.log"
    path.write_text("".join(piece for line in lines for piece in wrap(f"[default7]:{line}", 150, True)))
    res = replay_file(str(path))
    plain = replay_file(str(DATA / "megatron_ds_tr1_13b_spike_lossscale_01.log"))
    assert res.ranks == {7} and res.steps == plain.steps == 8 and res.merged_lines == 16
    assert (res.last.step, res.last.loss, res.last.loss_scale, res.last.overflow) == \
        (plain.last.step, plain.last.loss, plain.last.loss_scale, plain.last.overflow)


def test_unnamed_counts_dicts_and_epochs_as_steps():
    # mmdetection's logger: "Epoch [1][50/5808]\tlr: ..., loss: .."; fairseq's old progress bar: "| epoch 010  2000 /
    # 8223 loss=1.27 (1.50), .."; a Keras-style loop printing one line per epoch; an HF dict with a note after it
    mmdet = read(["2021-08-18 19:36:00,257 - mmdet - INFO - Epoch [1][50/5808]\tlr: 1.000e-02, eta: 5:02:49, "
                  "time: 0.784, data_time: 0.085, memory: 8104, loss_cls: 0.8811, loss: 1.6522\n",
                  "2021-08-18 19:36:36,093 - mmdet - INFO - Epoch [2][100/5808]\tlr: 1.000e-02, eta: 4:49:14, time: "
                  "0.717, data_time: 0.020, memory: 8104, loss_cls: 0.4124, loss: nan\n"])
    # mmcv's `time` includes its `data_time`: the record's step time is the rest
    assert [(r.step, r.step_time_s, r.data_wait_s) for r in mmdet] == \
        [(50, pytest.approx(0.699), 0.085), (5908, pytest.approx(0.697), 0.02)]
    assert math.isnan(mmdet[1].loss)
    fairseq = read(["| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962, lr=0.001, clip=100%, gnorm=2.1427\n",
                    "| epoch 010 | train loss 1.44 | train ppl 2.72 | lr 0.001000 | gnorm 2.1113\n",
                    "| epoch 011  1000 / 8223 loss=1.89 (1.38), wps=963, lr=0.001, clip=100%, gnorm=2.0860\n"])
    # counted from the first epoch the log shows: an excerpt's steps are the counts it prints
    assert [(r.step, r.loss, r.grad_norm) for r in fairseq] == [(2000, 1.27, 2.1427), (8223 + 1000, 1.89, 2.086)]
    keras = read([f"epoch: {e} loss: {0.2 + e / 1e5}\n" for e in range(3442, 3446)])
    assert [r.step for r in keras] == [3442, 3443, 3444, 3445]
    noted = read(["{'loss': 1.14,  'grad_norm':    92.10}    <-- spike #1 (step 4)\n",
                  "{'loss': 1.54,  'grad_norm':    29.00}\n"])
    assert [(r.step, r.grad_norm) for r in noted] == [(1, 92.1), (2, 29.0)]  # what is outside the dict is not read


def test_a_trainer_dict_whose_bar_was_drawn_over_is_a_step_line_at_its_progress_in_epochs():
    # the Hugging Face Trainer's `{'loss': .., 'learning_rate': .., 'epoch': 0.0518}` printed after tqdm's bar, the
    # bar drawn over on some lines (vistec-AI/thai2transformers' docs, tune/hf_trainer_apex_o1_..): at the epoch's
    # fraction times the steps per epoch the lines with both a bar's count and a fraction show (60 / 0.0444)
    lines = (DATA / "reallogs" / "tune" / "hf_trainer_apex_o1_wangchanberta_wisesight_steps_0_1352_loss_1_34_to_0_72_"
             "three_dynamic_scale_overflows_healthy_vistecai.log").read_text(encoding="utf-8").splitlines()
    assert "|" in lines[6] and lines[7].strip().startswith("{'loss'")
    recs = read(lines[6:13])
    assert [(r.step, r.loss) for r in recs] == [(60, 1.047784423828125), (70, 1.0573417663574218),
                                                (80, 1.0460289001464844), (90, 1.0624427795410156),
                                                (100, 0.9531181335449219), (110, 1.06204833984375),
                                                (120, 0.92392578125)]
    # the run's summary, other names than the step lines', is no step line; nor a line without a step before it
    # that gave both
    summary = "{'train_runtime': 430.5, 'train_samples_per_second': 25.1, 'train_loss': 0.8, 'epoch': 1.0}"
    assert [r.step for r in read(lines[6:8] + [summary]) if isinstance(r, StepRecord)] == [60, 70]
    assert [r.step for r in read(lines[7:9])] == [1, 2]  # numbered by their position, the log naming no step


def test_a_watchdog_timeout_cut_short_after_a_bar_is_a_stall_after_the_bar_count():
    # a web viewer's copy of a Hugging Face run: tqdm bars, then PyTorch's NCCL watchdog line cut off by the excerpt
    lines = ["[1757] {'loss': 0.0, 'grad_norm': 1.4142135381698608, 'learning_rate': 4.3e-06, 'epoch': 0.01}\n",
             "[1758] \n", "[1759]   1%|          | 20/1752 [00:57<1:22:40,  2.86s/it]\n",
             "[1763]   1%|▏         | 24/1752 [01:08<1:22:56,  2.88s/it][rank5]:[E602 11:17:52.185053341 "
             "ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operati\n"]
    assert rows(read(lines))[-1] == ("stall", 24)
    assert read(lines)[-1].rank == 5 and read(lines)[-1].value is None


# pytorch/pytorch issue #118369 (a NeMo run, Lightning's bar): the watchdog's line glued after the bar's postfix
NEMO_BAR = ("Epoch 0:   6%|\u2588\u2588                               | 32040/500150 [6:28:43<94:39:17,  1.37it/s, "
            "loss=2.6, v_num=95nc, reduced_train_loss=2.590, global_step=3.2e+4, consumed_samples=2.56e+7]")
NEMO_WATCHDOG = ("[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, "
                 "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.\n")


def test_a_bar_s_postfix_before_a_glued_trainer_message_is_the_record_of_its_count_then_the_report():
    parser = text.Parser()
    rec = parser.feed(NEMO_BAR + NEMO_WATCHDOG)
    # global_step=3.2e+4 is the bar's count rounded to 3 digits (tqdm's format_num): the count is the step
    assert rows([rec]) == [(32040, 2.6, None, None, None, None, None, None)]
    assert [(r.rule, r.step, r.rank, r.value) for r in parser.after] == [("stall", 32040, 0, 25624.887)]
    res = replay_file(str(DATA / "reallogs" / "tune" / "nemo_lightning_watchdog_118369.log"))
    assert res.steps == 1 and [(e.rule, e.step, e.rank) for e in res.events] == [("stall", 32040, 0),
                                                                                    ("stall", 32040, 7)]
    # a bar without values before the message (LLaMA-Factory, see above): the record of a bar alone, then the report
    assert rows(read(["  1%|          | 24/1752 [01:08<1:22:56,  2.88s/it]" + NEMO_WATCHDOG])) == [
        (24, None, None, None, None, None, None, None), ("stall", 24)]
    # the same postfix without a message is the record as well, and a step that is no rounding of the count
    # is the postfix's own
    assert rows(read([NEMO_BAR + "\n"])) == rows([rec])
    assert read([NEMO_BAR.replace("3.2e+4", "3.1e+4") + "\n"])[0].step == 31000


# fudan-generative-vision/hallo issue #152, description (accelerate's bar, DeepSpeed ZeRO): DeepSpeed prints its
# OVERFLOW message during the optimizer step, then the bar counts the step, so each message is glued after the
# bar of the step before the one it is about; the first comes before any bar
HALLO = [
    '[2024-07-10 15:50:45,798] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 262144, reducing to 131072',
    'Steps:   0%|                                                                                                                                         | 1/2000 [00:14<8:16:07, 14.89s/it, lr=1e-5, step_loss=nan, td=2.85s][2024-07-10 15:50:50,576] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 131072, reducing to 65536',
    'Steps:   0%|▏                                                                                                                                        | 2/2000 [00:19<4:57:47,  8.94s/it, lr=1e-5, step_loss=nan, td=0.11s][2024-07-10 15:50:55,602] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768',
]


def test_a_bar_keeps_its_record_before_a_glued_overflow_message_which_is_the_next_step_s(tmp_path):
    from test_replay_formats import write

    res = replay_file(write(tmp_path, "hallo.log", "\n".join(HALLO) + "\n"))
    # steps 1 and 2: the bar's step_loss=nan, each step's record taking over the message before its bar (its
    # scale); step 3: the last message's record
    assert res.steps == 3 and res.merged_lines == 2
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 1), ("nan_inf", 2)]
    assert (res.last.step, res.last.overflow, res.last.loss_scale, res.last.loss) == (3, True, 65536.0, None)
    parser = text.Parser()
    parser.feed(HALLO[0])
    second = parser.feed(HALLO[1])
    assert rows([second]) == [(1, "nan", None, 262144.0, True, 1e-5, None, None)] and parser.absorbs
    assert rows(parser.after) == [(2, None, None, 131072.0, True, None, None, None)] and parser.last is parser.after[0]


def test_a_bar_far_ahead_of_the_lines_naming_their_steps_counts_micro_batches():
    # liucongg/ChatGLM-Finetuning issue #130 (tests/data/reallogs/tune/deepspeed_chatglm3_..): DeepSpeed's `step=16,
    # skipped=16, ..` lines over a bar of micro-batches at 67 (gradient accumulation 4): the overflow message glued
    # to the bar is step 17's, not the bar's next count
    res = replay_file("tests/data/reallogs/tune/deepspeed_chatglm3_ptuning_rtx4090_steps_16_17_every_step_skipped_"
                      "scale_4_to_1_loss_scale_minimum_chatglmft130.log")
    assert [(e.rule, e.step) for e in res.events] == [("loss_scale_collapse", 17)]
    # a bar of optimizer steps a few ahead of step lines printed every 10 steps (DeepSpeed's steps_per_print) still
    # numbers the message
    lines = [f"[2024-01-17 10:10:24,477] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, skipped=0, lr=[0.0001], "
             "mom=[(0.9, 0.95)]" for s in (10, 20)]
    lines.append("  0%|          | 23/114599 [00:09<4:29:54,  7.07it/s][2024-01-17 10:10:25,080] [INFO] [loss_scaler.py"
                 ":183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1")
    recs = [r for r in read(lines) if isinstance(r, StepRecord)]
    assert (recs[-1].step, recs[-1].overflow) == (24, True)


# EleutherAI/gpt-neox issue #482, description: GPT-NeoX's OverflowMonitor (megatron/utils.py) ends the run
NEOX_IN_A_ROW = "Exception: Skipped 50 iterations in a row due to Overflow - Exiting training."
# epfLLM/Megatron-LLM issue #11, turn 3 (a Megatron fork's iteration lines, as GPT-NeoX's fork prints them)
MEGATRON_LLM = [
    " iteration      122/  250000 | consumed samples:       124928 | elapsed time per iteration (ms): 86545.2 | "
    "learning rate: 9.150E-06 | global batch size:  1024 | lm loss: 2.504220E+00 | loss scale: 1.0 | grad norm: "
    "0.231 | number of skipped iterations:   0 | number of nan iterations:   0 |",
    " iteration      123/  250000 | consumed samples:       125952 | elapsed time per iteration (ms): 87871.6 | "
    "learning rate: 9.225E-06 | global batch size:  1024 | lm loss: 2.493043E+00 | loss scale: 1.0 | grad norm: "
    "0.236 | number of skipped iterations:   0 | number of nan iterations:   0 |",
]


def test_a_trainer_s_count_of_overflows_in_a_row_is_that_many_overflowed_steps_the_rules_judge(tmp_path):
    from test_replay_formats import write

    # the traceback alone (the corpus file): 50 overflowed steps that no step number places, so not
    # known to be at start-up: a storm at the third
    res = replay_file(str(DATA / "reallogs" / "tune" / "gptneox_skipped_50_overflow_exception_482.log"))
    assert res.steps == 50 and (res.last.step, res.last.overflow) == (50, True)
    assert [(e.rule, e.step, e.onset_step, e.value) for e in res.events] == [("overflow_storm", 3, 1, 3.0)]
    # after the log's own iterations: the 50 steps after the last one seen, past start-up
    res = replay_file(write(tmp_path, "neox.log", "\n".join([*MEGATRON_LLM, NEOX_IN_A_ROW]) + "\n"))
    assert res.steps == 52 and res.last.step == 173
    assert [(e.rule, e.step, e.onset_step) for e in res.events] == [("overflow_storm", 126, 124)]
    # the same count through a rules file whose storm needs more than 50 overflows: the rules decide
    res = replay_file(write(tmp_path, "neox.log", "\n".join([*MEGATRON_LLM, NEOX_IN_A_ROW]) + "\n"),
                      Rules({"overflow_storm": {"max_overflows": 51}}))
    assert res.events == []


# deepspeedai/DeepSpeed issue #2069 (four ranks, the fused fp16 optimizer), the lines after its bar: each
# rank's "Grad overflow on iteration 9" after the logger's prefix, each rank's scaler line, then the engine's
# summary on rank 0
MEGATRON_SRUN = "megatron_llama_500iter_pretrain_grad_norm_1_6_to_85_8_spike_at_iter_30_run_stops_344_elena1861140.log"
DS_STARTUP = "deepspeed_gpt2_finetune_fp16_startup_overflows_iters_0_2_and_38_healthy_dsdataeff.log"
FUSED = (["[2022-07-05 16:30:10,796] [INFO] [fused_optimizer.py:382:_update_scale]\n", "Grad overflow on iteration 9\n"] * 4
         + ["[2022-07-05 16:30:10,796] [INFO] [fused_optimizer.py:383:_update_scale] Reducing dynamic loss scale from "
            "8388608.0 to 4194304.0\n"] * 2
         + ["[2022-07-05 16:30:10,797] [INFO] [fused_optimizer.py:383:_update_scale] Reducing dynamic loss scale from "
            "8388608.0 to 4194304.0\n"] * 2
         + ["[2022-07-05 16:30:10,797] [INFO] [logging.py:69:log_dist] [Rank 0] Overflow detected. Skipping step. "
            "Attempted loss scale: 8388608.0, reducing to 4194304.0\n"])


def test_deepspeed_fused_optimizer_overflows_are_one_overflowed_step_per_iteration_named():
    assert [(r.step, r.overflow, r.loss_scale) for r in read(FUSED)] == [(1, True, 8388608.0)]
    # the next iteration's messages: the next step
    again = [line.replace("iteration 9", "iteration 10").replace("8388608.0", "4194304.0").replace(
        "to 4194304.0", "to 2097152.0") for line in FUSED]
    assert [(r.step, r.loss_scale) for r in read(FUSED + again)] == [(1, 8388608.0), (2, 4194304.0)]
    # deepspeedai/DeepSpeed issue #697: the scaler already at its minimum, 1 "reducing" to 1: a collapse
    res = replay_file(str(DATA / "reallogs" / "tune" / "deepspeed_fused_min_scale_697.log"))
    assert res.steps == 1
    assert [(e.rule, e.step, e.value) for e in res.events] == [("loss_scale_collapse", 1, 1.0)]


def test_deepspeed_s_overflow_iteration_counted_from_0_places_it_among_step_lines_that_count_other_things():
    # DeepSpeedExamples' GPT-2 fp16 fine-tune: `step=N, skipped=K` every 2 optimizer steps (the first, step=0,
    # before any), the script's own `Step at N` counting micro-batches, and the unfused optimizer's
    # `Grad overflow on iteration: N` (from 0) at iterations 0, 1, 2 (the start-up) and 38: overflowed
    # steps 1, 2, 3 and 39 (the last taken over by `step=40, skipped=4`, the line of its interval), the
    # start-up's calibration, no storm
    res = replay_file(str(DATA / "reallogs" / "tune" / DS_STARTUP))
    assert res.events == []
    overflowed = [(r.step, r.loss_scale) for r in read(open(DATA / "reallogs" / "tune" / DS_STARTUP)) if r.overflow]
    assert overflowed == [(1, 65536.0), (2, 32768.0), (3, 16384.0), (40, 8192.0)]
    # a resumed run's optimizer counting from 0 again: its message belongs to the next step
    lines = ["iteration 17060/ 50000 | lm loss: 2.1 |\n", "Grad overflow on iteration: 8\n"]
    assert [(r.step, r.overflow) for r in read(lines)] == [(17060, None), (17061, True)]


def test_a_wrapped_line_behind_a_task_label_names_no_step():
    # a Megatron-LM fork's SLURM log (`srun --label`: `0: `), bf16 (`loss scale: 1.0` throughout): a wrapped
    # line of the argument dump, `0: B/shard_00058', '/iopsstor/..`, is no step 0 led by its count (the dump's
    # `lr`, `loss_scale_window` and compile times merged into it made a scale of 1000 fall to 1 at step 1)
    res = replay_file(str(DATA / "reallogs" / "tune" / MEGATRON_SRUN))
    assert min(r.step for r in read(open(DATA / "reallogs" / "tune" / MEGATRON_SRUN))) == 1
    assert [(e.rule, e.step) for e in res.events] == [("grad_norm_spike", 30)]  # the file's one event (labels.yaml)


def test_a_command_line_option_is_no_value_of_a_step():
    assert text.pairs(text.clean("  --learning-rate 3e-4 --min-learning-rate 3e-5 --warmup-steps 0 \\")) == []
    assert text.pairs(text.clean("epoch : 0----loss : 2.62")) == [("epoch", "0", None, None), ("loss", "2.62", None, None)]


def test_a_scaler_line_of_its_own_gives_the_overflowed_step_its_scale():
    # apex amp on Ascend NPU (a LLaMA-Factory run): the overflow message, then the scaler's own line
    out = read(["{'loss': 5.2843, 'grad_norm': 641.94, 'learning_rate': 5e-05, 'epoch': 4.7}\n",
                "Gradient overflow. Skipping step\n", "Loss scaler reducing loss scale to 512.0\n",
                "Gradient overflow. Skipping step\n", "Loss scaler reducing loss scale to 256.0\n"])
    assert [(r.step, r.overflow, r.loss_scale) for r in out] == [(1, None, None), (2, True, 512.0), (3, True, 256.0)]


def test_a_record_names_its_rank_in_jsonl_as_in_a_csv_column_or_a_torchrun_prefix(tmp_path):
    # one log of two ranks, interleaved; rank 1's loss is NaN at step 25: three spellings of the same run
    from test_replay_formats import losses, write

    runs = {0: losses(30), 1: losses(30, nan_at=25)}
    order = [(r, s) for s in range(1, 31) for r in (0, 1)]
    shown = {r: {s: "NaN" if math.isnan(v) else v for s, v in run.items()} for r, run in runs.items()}
    jsonl = "".join(f'{{"step": {s}, "loss": {shown[r][s]}, "rank": {r}}}\n' for r, s in order)
    csv = "step,loss,rank\n" + "".join(f"{s},{shown[r][s]},{r}\n" for r, s in order)
    tee = "".join(f"[default{r}]:step: {s}, loss: {shown[r][s]}\n" for r, s in order)
    for name, body in (("all.jsonl", jsonl), ("all.csv", csv), ("tee.log", tee)):
        res = replay_file(write(tmp_path, name, body))
        assert res.ranks == {0, 1} and res.steps == 60, name
        assert [(e.rule, e.step, e.rank) for e in res.events] == [("nan_inf", 25, 1)], name


def test_a_step_logged_every_n_steps_takes_its_overflow_message_and_its_second_line():
    # MindYOLO logs every 100 steps: an overflow message, then the step's loss line, then its step-time line
    res = replay_file(str(DATA / "reallogs" / "tune" / "mindyolo_loss_spike_402.log"))
    assert res.steps == 4 and res.merged_lines == 8 and res.skipped == {"no step fields": 1}  # the cut last line
    # 8.85 -> 8712.59; each `overflow, still update` applied its non-finite update: an overflow event each
    assert sorted((e.rule, e.step) for e in res.events) == [("loss_spike", 300)] + [
        ("overflow_storm", s) for s in (100, 200, 300, 400)]
    recs = read(sample("reallogs/tune/mindyolo_loss_spike_402.log"))
    assert rows(recs) == [(s, loss, None, 1024.0, True, lr, t, None) for s, loss, lr, t in (  # its `cur_lr: ..`
        (100, 11.6707, 0.09924906492233276, 5.73671), (200, 8.8465, 0.09849812090396881, 0.6544),
        (300, 8712.5938, 0.09774718433618546, 0.69417), (400, 15806.3818, 0.0969962477684021, 0.66074))]
    # a log of every step keeps its overflow message's own record when no step line of that step follows
    lines = ["iteration 7/ 100 | lm loss: 2.5 |\n", "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss "
             "scale: 1024, reducing to 512\n", "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: "
             "512, reducing to 256\n", "iteration 9/ 100 | lm loss: 2.4 |\n"]
    assert [(r.step, r.loss, r.overflow, r.loss_scale) for r in read(lines)] == \
        [(7, 2.5, None, None), (8, None, True, 1024.0), (9, 2.4, True, 512.0)]


def test_an_overflow_message_s_record_has_no_pace_by_the_line_times(tmp_path):
    # MindYOLO's overflow message comes before its step's lines (every 100 steps): the record it makes stands for
    # steps it cannot count. The step line after it is timed from the step line before (its printed 654.40 ms is
    # the 65 s since over 100 steps), and a last message with no step line after it is no 66 s step
    from test_replay_formats import write

    lines = (DATA / "reallogs" / "tune" / "mindyolo_loss_spike_402.log").read_text().splitlines(True)[:10]
    res = replay_file(write(tmp_path, "mindyolo.log", "".join(lines)))
    assert res.steps == 4 and sorted(res.stats.samples["step_time_s"].values) == [0.6544, 0.69417, 5.73671]
    assert [(e.rule, e.step) for e in res.events] == [
        ("overflow_storm", 100), ("overflow_storm", 200), ("loss_spike", 300), ("overflow_storm", 300)]


def test_a_hang_in_the_line_times_is_a_stall_as_the_watchdog_judges_the_clock(tmp_path):
    from training_monitor.ruleset import Rules

    # BLOOM's chronicle: the last iteration (111 s each), its validation, then only the scheduler's hourly pulse
    bloom = replay_file(str(DATA / "reallogs" / "tune" / "bigscience_bloom_eval_hang_45000.log"))
    assert [(e.rule, e.step, e.rank, round(e.value)) for e in bloom.events] == [("stall", 45000, 7, 3602)]
    # nanoGPT's iteration 3000 waits 36 s for its evaluation and checkpoint, the lines come 11 s apart: within
    # the stall rule's allowance, max(min_seconds, factor x 11 s); under a tighter rule the evaluation's result
    # (`step 3000: train loss .., val loss ..`) makes the silence before it the evaluation's, with the allowance of
    # one (the start-up one); past that too when it is tighter still
    nanogpt = str(DATA / "nanogpt_nan_14.log")
    def stalls(rules=None):
        return [(e.step, e.value) for e in replay_file(nanogpt, rules).events if e.rule == "stall"]

    tight = {"factor": 3.0, "min_seconds": 20.0}
    assert stalls() == [] and stalls(Rules({"stall": tight})) == []
    assert stalls(Rules({"stall": {**tight, "startup_seconds": 30.0}})) == [(2990, 36.0)]
    assert stalls(Rules({"stall": {**tight, "startup_seconds": 30.0, "enabled": False}})) == []
    # torchtitan's 91 s checkpoint save after step 3500 (heldout32, 2.3 s steps): a line says the save begins, the
    # silence after it gets the start-up allowance until the next step line, as the live watchdog's does
    save = ["[titan] 2026-05-10 17:29:47,694 - root - INFO - step: 3498  loss:  2.60358  grad_norm:  0.1318",
            "[titan] 2026-05-10 17:29:49,957 - root - INFO - step: 3499  loss:  2.53073  grad_norm:  0.1456",
            "[titan] 2026-05-10 17:29:52,297 - root - INFO - step: 3500  loss:  2.48066  grad_norm:  0.1275",
            "[titan] 2026-05-10 17:29:52,298 - root - INFO - Saving the checkpoint (or staging if async is enabled).",
            "[titan] 2026-05-10 17:31:23,074 - root - INFO - Finished saving the checkpoint in 90.78 seconds.",
            "[titan] 2026-05-10 17:31:25,355 - root - INFO - step: 3501  loss:  2.51321  grad_norm:  0.1300"]
    def events(lines):
        path = tmp_path / "titan.log"
        path.write_text("\n".join(lines) + "\n")
        return [(e.rule, e.step) for e in replay_file(str(path), Rules({"stall": {"startup_steps": 1,
                                                                                   "startup_seconds": 600.0}})).events]
    assert events(save) == [] and events(save[:3] + save[4:]) == [("stall", 3500)]
    # an evaluation's line (a word for one, or a metric evaluations report) gets the same allowance: arcface_torch's
    # 3.6 minutes of `[lfw][26000]Accuracy-Flip: ..` lines after 16 s steps (tune/arcface_torch_r100_fp16_..)
    evaluating = "[titan] 2026-05-10 17:29:52,298 - root - INFO - Evaluating the validation set"
    assert events(save[:3] + [evaluating] + save[4:]) == []
    arcface = "arcface_torch_r100_fp16_steps_25000_26950_3100_to_2000_samples_s_after_eval_arcfacelog.log"
    assert "stall" not in [e.rule for e in replay_file(str(DATA / "reallogs" / "tune" / arcface)).events]
    # so does the silence an evaluation's result ends, the evaluation having run unannounced: a loop's 6-minute
    # validation pass between 11 s step lines (tune/custom_action_detection_..): a stall only past that allowance
    action = (DATA / "reallogs" / "tune" / "custom_action_detection_steps_100_29800_clsloss_stuck_0p69_loc_falls_"
              "robbie-luo.log").read_text().splitlines()
    assert "Validation:" in action[100] and events(action[97:103]) == []
    path = tmp_path / "titan.log"
    path.write_text("\n".join(action[97:103]) + "\n")
    short = Rules({"stall": {"startup_steps": 1, "startup_seconds": 300.0}})
    assert [(e.rule, e.step) for e in replay_file(str(path), short).events] == [("stall", 10000)]
    # an evaluation whose lines have no time of their own ran somewhere in the silence, for as long as the line times
    # cannot tell: JDE's hour of `Image Total P R mAP` rows and feature extraction between timed step lines 5
    # minutes apart (tune/jde_mot_..); the same silence with those lines left out is a stall, and so is BLOOM's above
    # (its untimed validation result came before hours of pulses, and no step line followed them)
    jde = (DATA / "reallogs" / "tune" / "jde_mot_epochs_0_3_batches_0_160_total_loss_negative_eval_time_healthy_"
           "scushaker.log").read_text(encoding="utf-8").splitlines()
    assert any(line.split() == ["Image", "Total", "P", "R", "mAP"] for line in jde) and events(jde) == []
    assert events([line for line in jde if line.startswith("2021-")]) == [("stall", 160)]


def test_a_line_led_by_bare_counts_numbers_its_step():
    # yolact's log: "[  1]    1450 || B: 5.514 | C: .. || timer: 0.291" (epoch, iteration; no name the table knows)
    recs = read(sample("reallogs/tune/apex_yolact_scale_collapse_359.log"))
    assert [(r.step, r.overflow, r.loss_scale) for r in recs if r.overflow] == \
        [(1520, True, 1.52587890625e-05), (1531, True, 7.62939453125e-06)]  # apex's messages mark their intervals
    assert [r.step for r in recs if not r.overflow] == list(range(1450, 1520, 10)) + [1530]
    # a leading count is no step when the line names its step, or when a date-time leads it
    assert [r.step for r in read(["7 | step: 12, loss: 2.5\n", "2024-05-30 10:21:44 step: 13, loss: 2.4\n"])] == \
        [12, 13]
    # a logger's prefix (date-time, level) before the bare counts: the Learning-to-See-in-the-Dark loop's
    # `333 154 Loss=nan Time=0.040` and a `print(t, loss.item())` pair, written through a logger
    lsid = read(["[2024-03-07 06:40:01,123] 333 154 Loss=nan Time=0.040\n", "INFO:root: 333 155 Loss=nan Time=0.041\n",
                 "2018-02-04 05:22:22 | INFO | 76980 nan\n"])
    assert [r.step for r in lsid] == [154, 155]
    pairs = read(["INFO:root:2018-02-04 05:22:22,000: 76980 2.61\n", "[WARNING] 76990 nan\n"])
    assert [r.step for r in pairs] == [76980, 76990] and math.isnan(pairs[1].loss)
    # a count may name its counter after it (DirtyHarryLYL/HAKE-Action-Torch issue #34, tune/custom_pytorch_hake_..)
    hake = (DATA / "reallogs" / "tune" / "custom_pytorch_hake_ae_pretrain_iters_0_6000_loss_37_to_neg801_then_nan_"
            "dirtyharrylyl34.log").read_text(encoding="utf-8").splitlines()
    assert [(r.step, r.loss) for r in read(hake[:3])] == [(0, 37.2266), (2000, -403.4386), (4000, -801.8414)]
    # RecBole's dates, `12 Nov 21:12` (RUCAIBox/RecBole issue #1533, tune/recbole_mamo_..): no count of the line
    recbole = (DATA / "reallogs" / "tune" / "recbole_mamo_epochs_0_3_train_loss_zero_valid_score_frozen_degenerate_"
               "rucaibox1533.log").read_text(encoding="utf-8").splitlines()
    assert [(r.step, r.loss) for r in read(recbole[:8]) if isinstance(r, StepRecord)] == [(0, 0.0), (1, 0.0)]


def test_a_value_named_by_a_phrase_that_places_it_at_a_count_is_at_that_count():
    # stmstmstm/stm's `Loss for Iter 1: 0.521861, acc = 0.090000` (tune/custom_loop_iters_1_4951_..)
    lines = (DATA / "reallogs" / "tune" / "custom_loop_iters_1_4951_loss_0p52_to_0p10_test_acc_0p61_to_0p78_healthy_"
             "stmstmstm.log").read_text(encoding="utf-8").splitlines()
    assert [(r.step, r.loss) for r in read(lines[1:4])] == [(1, 0.521861), (51, 0.398579), (101, 0.378631)]
    # `at`, `after`, `of` and `is` too; a phrase whose first words name no field, or with no value after the count,
    # places nothing
    assert text.pairs("loss at step 20 is 0.5") == [("step", "20", None, None), ("loss", "0.5", None, None)]
    assert text.pairs("Mean loss of epoch 3: nan")[0] == ("epoch", "3", None, None)
    assert text.pairs("Saving model at step 20: done") == [("step", "20", None, None)]
    assert text.pairs("Loss for Iter 1 done") == []
    # a word before the counter's name: a hand-written loop's last line (cccbook/py2gpt, tune/numpy_macrograd_..)
    macrograd = (DATA / "reallogs" / "tune" / "numpy_macrograd_mlp_mnist_steps_0_20000_loss_14_06_to_0_30_healthy_"
                 "cccbook.log").read_text(encoding="utf-8").splitlines()
    assert macrograd[-1].startswith("loss in final step 20000 is")
    assert [r.step for r in read(macrograd)] == list(range(0, 20001, 1000))
    assert text.pairs("Training loss at global step 20: 0.8")[1] == ("loss", "0.8", None, None)
    # leader dashes between the separator and the value (Rudrabha/Wav2Lip issue #39, tune/wav2lip_syncnet_..)
    wav2lip = (DATA / "reallogs" / "tune" / "wav2lip_syncnet_eval_steps_4000_20000_loss_1p16_to_4p15_rising_"
               "rudrabha39.log").read_text(encoding="utf-8").splitlines()
    assert wav2lip[0] == "4000step: current averaged_loss is ---------- 1.1633416414260864"
    recs = read(wav2lip)
    assert [r.step for r in recs] == list(range(4000, 20001, 1000)) and recs[0].loss == 1.1633416414260864
    assert text.pairs("loss: ------- 2.5 lr: 0.1") == [("loss", "2.5", None, None), ("lr", "0.1", None, None)]
    assert text.pairs("loss:---2.5") == []  # (no leader: dashes glued to the value)
    # leader dots are Megatron's arguments list, no step's values (tune/megatron_llama_500iter_..)
    assert text.pairs("0: :  inprocess_progress_watchdog_interval ............ 1.0") == []


def test_a_dict_after_the_line_s_own_loss_is_its_breakdown():
    # ROMP prints its loss and then its parts as a dict: the line is the record (step, time, loss), not the dict;
    # a dict that names the loss itself after a bar's running average is still the batch's record (Keras)
    recs = read(["Epoch: [0][100/19445] Time 2.87 RUN 0.87 Lr 5e-05 Loss 617.70 | Losses {'reg': 567.27, 'det': 50.43}\n",
                 "Epoch: [0][150/19445] Time 3.50 RUN 0.88 Lr 5e-05 Loss 507.33 | Losses {'reg': 462.25, 'det': 45.08}\n"])
    assert [(r.step, r.loss) for r in recs] == [(100, 617.7), (150, 507.33)]
    recs = read(["35/50 [=====>....] - ETA: 13s - loss: 9.4006 - acc: 0.1041{'acc': 0.108, 'loss': 9.4531, 'batch': 35}\n"])
    assert [(r.step, r.loss) for r in recs] == [(35, 9.4531)]


def test_torchrun_s_rank_prefix_on_the_step_lines_names_their_rank(tmp_path):
    # torchrun --tee (PyTorch 2.2 on: `[rank1]:`) interleaves every worker's lines in one log: each rank is its
    # own stream (a NaN on rank 1 is rank 1's, and the ranks' losses are no spikes of one another)
    lines = (DATA / "reallogs" / "tune" / "torchtitan_rank_prefix_healthy_3393.log").read_text().splitlines()[:12]
    log = tmp_path / "torchrun.log"
    with open(log, "w") as f:
        for line in lines:
            f.write(line + "\n")
            other = line.replace("[rank0]:", "[rank1]:")
            if " step: 16 " in other:
                other = re.sub(r"loss: +[\d.]+", "loss:  nan", other)
            f.write(re.sub(r"loss: +([\d.]+)", lambda m: f"loss: {float(m.group(1)) * 3:.5f}", other) + "\n")
    res = replay_file(str(log))
    assert res.ranks == {0, 1} and res.records == 2 * len(lines)
    assert [(e.rule, e.rank, e.step) for e in res.events] == [("nan_inf", 1, 16)]
    # on PyTorch's C++ warnings and errors alone, amid a worker's own lines, it is a decoration (an accelerate
    # run's NCCL socket errors, `[rank1]:[E ..]`: the run's report at its last step, 1)
    mixed = replay_file(str(DATA / "reallogs" / "tune" / "uniworld_accelerate_step_1_104s_it_nccl_socket_errors_"
                                                      "operations_timed_out_46.log"))
    assert [(e.rule, e.step) for e in mixed.events] == [("stall", 1)]


def test_a_few_nul_bytes_in_a_log_do_not_make_it_binary(tmp_path):
    # a node that crashed leaves NUL padding where the file system had allocated: the log is still text
    log = tmp_path / "train.log"
    lines = "".join(f"step {s} loss {3.0 - 0.01 * s:.4f}\n" for s in range(1, 41))
    log.write_bytes(lines.encode() + b"\x00" * 16 + b"step 41 loss nan\n")
    res = replay_file(str(log))
    assert res.steps == 41 and [(e.rule, e.step) for e in res.events] == [("nan_inf", 41)]


def test_a_word_value_ends_before_a_capitalised_word_glued_to_it():
    # Keras' bar with the next line's start glued on, its line break lost (kr-colab/ReLERNN issue #26,
    # tune/keras_relernn_..): `- loss: nanEpoch 1/1000` holds a NaN loss, not a word `nanEpoch`
    lines = (DATA / "reallogs" / "tune" / "keras_relernn_epochs_308_310_loss_0_2445_to_nan_at_309_val_nan_"
             "krcolab26.log").read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[4].rstrip().endswith("loss: nanEpoch 1/1000")
    recs = [r for r in read(lines) if isinstance(r, StepRecord)]
    assert len(recs) == 3 and [math.isnan(r.loss) for r in recs] == [False, True, True]
    # a word glued in lower case is still a word (`nanoseconds`, `information`): no value
    assert [r.loss for r in read(["step 3 loss: 2.5\n", "step 4 loss: nanoseconds 4\n"])] == [2.5, None]


def test_a_loss_part_that_is_not_finite_makes_the_line_s_loss_not_finite():
    # CodeFormer's BasicSR log (sczhou/CodeFormer issue #367, tune/basicsr_codeformer_..): a finite
    # `cross_entropy_loss` is the line's loss, but `l_g_pix`, `l_g_percep` and `l_identity`, parts of the objective
    # it optimises, are NaN: so is the objective
    lines = (DATA / "reallogs" / "tune" / "basicsr_codeformer_stage3_iters_1400_1500_l_g_pix_percep_identity_nan_"
             "from_first_record_sczhou367.log").read_text(encoding="utf-8").splitlines()
    recs = read(lines[-2:])
    assert [r.step for r in recs] == [1400, 1500] and all(math.isnan(r.loss) for r in recs)
    # finite parts leave the line's own loss as it is; a NaN running average is no part (a past step's NaN)
    assert [r.loss for r in read(["step 3 cross_entropy_loss: 2.5 l_g_pix: 0.1\n",
                                  "step 4 loss: 2.4 (avg nan) l_g_pix: 0.1\n"])] == [2.5, 2.4]


def test_a_line_tagged_as_an_evaluation_is_no_training_step():
    # PaddleClas' `[Eval][Epoch 1][Iter: 0/67]CELoss: ..` lines between its `[Train]` epochs
    # (tune/paddleclas_repvgg_..): each evaluation batch's loss had been a training step's
    paddleclas = (DATA / "reallogs" / "tune" / "paddleclas_repvgg_d2se_epochs_1_10_iters_0_140_celoss_2p44_to_"
                  "1p46_batch_cost_0p10_to_0p15_healthy_tomry1114.log").read_text(encoding="utf-8").splitlines()
    assert "[Eval][Epoch 1][Iter: 0/67]CELoss" in paddleclas[16]
    items = read(paddleclas[:30], evaluations=True)
    assert [r.step for r in items if isinstance(r, StepRecord)] == [*range(0, 141, 10), 148, 158, 168]
    # the evaluation's first line is its evaluation, after the last step (the lines after it repeat it: no step
    # line between them)
    assert [(e.step, e.loss) for e in items if isinstance(e, Evaluation)] == [(140, 2.2008)]
    # MMEngine's `Epoch(val) [1][4/4]` after `Epoch(train)   [1][15/15]` (heldout38/mmaction2_mmengine_..)
    mmengine = (DATA / "reallogs" / "heldout38" / "mmaction2_mmengine_epochs_1_19_grad_norm_nan_inf_loss_finite_"
                "cjlsysu.log").read_text(encoding="utf-8").splitlines()
    assert "Epoch(val) [1][4/4]" in mmengine[5]
    assert [r.step for r in read(mmengine[:12]) if isinstance(r, StepRecord)] == [15, 30]
