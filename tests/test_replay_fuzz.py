"""Property tests: no line breaks a parser, and the runner accounts for every line of any input.

Inputs are built from real lines (the shared samples and one line of every other format) cut at random places,
with their fields shuffled, mixed with random text and bytes, joined by random CR/LF/CRLF."""
import os
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from training_monitor.record import StepRecord
from training_monitor.replay import PARSERS, ReplayError, replay_file
from training_monitor.replay.base import Report
from training_monitor.ruleset import Rules

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data"
EXTRA = [
    "epoch: 1 step: 10, loss is 2.3025851",
    "Train epoch time: 1234.567 ms, per step time: 123.457 ms (data time: 1.234 ms)",
    'time_monitor{type="per_step_time"} 135.572 1714550400123 mfu:0.47% hfu:0.47%',
    "ValueError: In epoch: 1 step: 3, loss is NAN or INF, training process cannot continue, terminating training.",
    "iter 100: loss 2.4213, time 152.31ms, mfu 31.20%",
    "step:10/3200 train_loss:7.1234 train_time:1234ms step_avg:123.40ms",
    (' 14%|#4        | 380/2724 [14:02:33<86:01:24, 132.12s/it][2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:'
     '181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, reducing to 32'),
    "[Rank 0] step=510, skipped=8, lr=[2.9e-05], mom=[(0.9, 0.999)]",
    "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
    ("[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 "
     "milliseconds before timing out."),
    "EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times out. rankId[6]",
    "wait socket establish timeout, role[0] rank[0] timeout[120 s]",
    '{"step": 100, "loss": 2.31, "grad_norm": 1.2, "lr": 0.0003, "loss_scale": 65536, "overflow": false}',
    '{"rule": "loss_spike", "step": 151, "onset_step": 149, "value": "nan", "message": "m", "rank": 1}',
    '{"action": "rollback", "at_step": 151, "to_step": 125}',
    "step,loss,grad_norm,loss_scale,overflow,lr,step_time_s,data_wait_s,tokens,rank,timestamp,steps,mfu",
    "1,10.62,1.53,65536.0,False,1e-05,0.41,0.002,16384,0,1714550400.1,1,",
    "[default1]:epoch: 1 step: 11, loss is 2.2",
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    "| WARNING: overflow detected, setting loss scale to: 0.25",
    "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.",
    "overflow, still update, loss scale adjust to 512.0",
    "[WARNING] ME(3613:1405,MainProcess):2024-03-07-06:39:44.569.244 There are no valid values in the ndarray(size=32)",
    "> [1763] \x1b[32m[rank0]:step: 200  loss:  6.1384  tps: 5,856  mfu: 34.29%\x1b[0m",
    "[step=2/739328,epoch=0]",
    "    optim/total_grad_norm=0.0002",
    "Epoch:[0/19](100/24681) loss:5.251 lr:0.00020000 epoch_Time:98.0min:",
    "{'loss': 0.0, 'grad_norm': 1.4142135381698608, 'learning_rate': 4.3e-06, 'epoch': 0.01}",
    "epoch 99999999999999999999 step 3/10 loss 2.5 | iteration 123456789012345678901234567890 | loss 1",
    "iteration 5/10 | lm loss: 2.0 | number of skipped iterations: nan | number of nan iterations: inf | tps: inf",
]
LINES = [line for f in sorted(DATA.glob("*.log")) for line in f.read_text().splitlines() if line.strip()] + EXTRA
SEPARATORS = [", ", " | ", " ", ":", "="]
RULES = Rules.load()
TEXT_FORMATS = [name for name in PARSERS if name != "tensorboard"]


@st.composite
def lines(draw):
    line = draw(st.sampled_from(LINES))
    how = draw(st.sampled_from(["as is", "cut", "shuffled", "text", "spliced"]))
    if how == "cut":
        line = line[:draw(st.integers(0, len(line)))]
    elif how == "shuffled":
        sep = draw(st.sampled_from(SEPARATORS))
        parts = line.split(sep)
        random.Random(draw(st.integers(0, 2 ** 16))).shuffle(parts)
        line = sep.join(parts)
    elif how == "text":
        line = draw(st.text(max_size=120))
    elif how == "spliced":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.text(max_size=20)) + line[at:]
    return line


@st.composite
def files(draw):
    out = b""
    for line in draw(st.lists(lines(), max_size=40)):
        out += line.encode("utf-8", "surrogatepass") if draw(st.booleans()) else line.encode("utf-8", "replace")
        if draw(st.integers(0, 9)) == 0:
            out += draw(st.binary(max_size=8))
        out += draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"\r", b""]))
    return out


def line_count(data: bytes) -> int:
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(lines(), max_size=30))
def test_no_line_breaks_any_parser(batch):
    for name in TEXT_FORMATS:
        parser = PARSERS[name].Parser(rank=1)
        for line in batch:
            for piece in (line, line + "\n", line.replace("\n", "\r")):
                item = parser.feed(piece)
                assert item is None and parser.reason or isinstance(item, (StepRecord, Report, tuple)), (name, piece)


# a bar's record, then the record of the DeepSpeed overflow message glued after it (found by this test)
GLUED = (b"[Epoch 0 / Train]:   0% 432/788222 [29:31<786:20:54,  3.59s/it, loss=nan, lr=2.5e-5][2021-06-08 "
         b"12:03:34,071] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. "
         b"Attempted loss scale: 2.0, reducing to 1.0\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files(), st.sampled_from(["auto", *TEXT_FORMATS]))
@example(GLUED, "auto")
def test_every_input_line_is_a_record_a_report_merged_or_skipped(data, fmt):
    fd, path = tempfile.mkstemp(suffix=".log")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            res = replay_file(path, RULES, fmt)
        except ReplayError as exc:
            assert any(s in str(exc) for s in ("empty file", "binary file", "no known training-log format",
                                               "step lines found")), str(exc)
            return
        assert res.steps + res.evaluations + res.reports + res.merged_lines + res.skipped_lines - res.glued == \
            line_count(data) == res.lines  # (a line may give a record, then a message's record or report)
        assert sum(res.skipped.values()) == res.skipped_lines
    finally:
        os.unlink(path)


@settings(max_examples=500, deadline=None)
@given(st.lists(lines(), min_size=1, max_size=6))
def test_the_text_readers_kept_shapes_read_as_the_full_reading(batch):
    # the text reader keeps each line shape's reading (monitor/replay/text.py): a line read through it reads as
    # the line read in full
    from training_monitor.replay import text

    for line in batch + [line.replace("1", "7").replace("0", "00") for line in batch]:
        t = text._dict(text._undecorated(line).rstrip("\r\n"))
        assert text.Parser._read(t, True) == text.Parser._read(t, False), t

