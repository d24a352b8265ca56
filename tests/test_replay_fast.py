"""Replay's compiled reader (monitor/replay/scan.pyx) gives what the runner's line-by-line loop gives.

Every log of the real-log corpus and the speed benchmark's generated logs (short, in blocks that cut lines
anywhere), replayed through both; custom loops' logs read by the text reader (runs of its plain step lines
through the compiled reader, scan.TextBatch, and their shape's recipe, or every line in full) with random
values, NaN and Inf, loss scale drops and rises, unit changes, missing fields, decorations (colours, quoting,
line numbers, rank prefixes, CRLF, non-ASCII text, tensors), overflow messages, a message across two step
lines, resumes, hard wraps, silences long enough for a stall and other lines between the step lines; and
MindFormers logs full of what real logs hold around the step lines (progress bars with block characters and
carriage returns, checkpoint lines, the trainer's NaN and global-norm lines, a resume that repeats steps, a
log captured twice, torchrun rank prefixes, CRLF line ends, bad UTF-8, numbers the fast reader leaves to the
parser), replayed through the fast path, in blocks of several sizes, and through the line-by-line loop: the
same results, events, would-be rollbacks and statistics.
"""
from __future__ import annotations

import importlib.util
import random
import time
from collections import deque
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from training_monitor.replay import text
from training_monitor.replay.clock import Silence, line_time
from training_monitor.replay.runner import ReplayError, ReplayOptions, replay_file

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "tests" / "data" / "reallogs").glob("*/*.log"))

PREFIX = "2025-04-07 15:34:29,173 - [mindformers/core/callback/callback.py:529] - INFO - "
STEP = ("{{ Epoch:[{epoch:3d}/{epochs:3d}], step:[{step:5d}/{per:5d}], loss: {loss}, per_step_time: {ms}ms, "
        "lr: {lr}, overflow cond: {overflow}, loss_scale: {scale}, global_norm: [{norm}], "
        "train_throughput_per_npu: 170.738T")


def mindformers_log(rng: random.Random, steps: int) -> bytes:
    per, lines, step, loss, scale = 400, [], 0, 10.0, 65536.0
    while step < steps:
        step += rng.choice([1] * 20 + [2, 3])  # now and then a sink of several steps
        if rng.random() < 0.01:
            step = max(1, step - rng.randint(1, 60))  # a resume from an earlier checkpoint
        loss = max(0.5, loss * 0.997 * (1 + rng.gauss(0, 0.02)))
        shown = f"{loss:.3f}"
        overflow = rng.random() < 0.03
        scale = scale / 2 if overflow else scale * 2 if rng.random() < 0.01 else scale
        r = rng.random()
        if r < 0.01:
            shown = rng.choice(["nan", "inf", " 3.5", "1_0", "[2.1/2.2]"])  # the parser's, not the fast path's
        elif r < 0.02:
            shown = f"{loss * rng.uniform(2, 5):.3f}"  # a spike
        norm = rng.choice([f"{rng.lognormvariate(0, 0.5):.6f}", "", "1 31049", "nan"] if rng.random() < 0.05
                          else [f"{rng.lognormvariate(0, 0.5):.6f}"])
        epoch, in_epoch = divmod(step - 1, per)
        line = PREFIX + STEP.format(epoch=epoch + 1, epochs=3, step=in_epoch + 1, per=per, loss=shown,
                                    ms=rng.choice([1750, 1752, 0, 99999]), lr=rng.choice(["1e-05", "0.0", "3.2e-4"]),
                                    overflow=overflow, scale=scale, norm=norm)
        if rng.random() < 0.03:
            line = line.replace(", per_step_time", ",  per_step_time")  # odd spacing: the general reader's
        lines.append(line)
        if rng.random() < 0.02:
            lines.append(line)  # the same line twice (a log captured twice)
        if rng.random() < 0.1:
            bar = "█" * rng.randint(0, 50)
            lines.append(PREFIX + f"  {step / steps:5.1%} |{bar:<50}| 4.57143 samples/s/p  10 days, 3:00:25 }}")
        r = rng.random()
        if r < 0.01:
            lines.append(f"......Saving ckpt......, step: {step}, path: ./output/checkpoint/rank_0/x-{step}_1.ckpt")
        elif r < 0.015:
            lines.append(PREFIX + "The current value of loss is NaN, terminate training.")
        elif r < 0.02:
            lines.append(PREFIX + f"Current global norm [44.3] of step {step} has been 1 consecutive times greater "
                                  "than threshold: 3.0")
        elif r < 0.025:
            lines.append(f"[default1]:{PREFIX}" + STEP.format(epoch=1, epochs=3, step=step % per + 1, per=per,
                                                             loss="2.0", ms=10, lr="1e-05", overflow=False,
                                                             scale=1.0, norm="1.0"))
        elif r < 0.03:
            lines.append("")
    out = []
    for line in lines:
        data = line.encode()
        r = rng.random()
        if r < 0.02:
            data += b"\r"  # CRLF
        elif r < 0.03:
            data = data[:40] + b"\r" + data[40:]  # a lone carriage return: two text lines
        elif r < 0.035:
            data = data[:20] + b"\xff\xfe" + data[20:]  # bad UTF-8 in the prefix
        out.append(data)
    return b"\n".join(out) + (b"\n" if rng.random() < 0.5 else b"")


def result(path, options) -> dict:
    res = replay_file(str(path), options=options)
    out = res.to_dict()
    out["last"] = repr(res.last)
    out["tracks"] = {rank: {f: t.series[f].points() for f in t.series} for rank, t in res.tracks.items()}
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_fast_path_gives_the_line_by_line_results(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "rank_0.log"
    path.write_bytes(mindformers_log(rng, rng.choice([300, 1500])))
    options = [dict(), dict(checkpoint_every=50, healthy_after=10), dict(checkpoint_every=7, max_rollbacks=1),
               dict(plot_ranks=1)][seed % 4]
    fast = [result(path, ReplayOptions(**options))]
    for block in (97, 4096):  # blocks that cut lines anywhere
        fast.append(result(path, ReplayOptions(**options, block_bytes=block)))
    slow = result(path, ReplayOptions(**options, fast=False))
    assert slow["steps"] > 100 and slow["anomalies"]
    for got in fast:
        assert got == slow


def test_a_slower_step_time_is_judged_in_steps_per_second_both_ways(tmp_path):
    # MindFormers step lines give no tokens: the compiled reader judges their steps/s as the record's rec_from does
    lines = [PREFIX + STEP.format(epoch=1, epochs=1, step=i, per=400, loss=f"{2.5 + 0.01 * (i % 7):.3f}",
                                  ms=1750 if i <= 200 else 9000,
                                  lr="1e-05", overflow=False, scale=65536.0, norm="1.0") for i in range(1, 261)]
    path = tmp_path / "rank_0.log"
    path.write_text("\n".join(lines) + "\n")
    fast, slow = both(path)
    assert fast == slow
    assert [(e["rule"], e["onset_step"]) for e in fast["anomalies"]] == [("throughput_drop", 201)]
    assert fast["anomalies"][0]["message"].startswith("steps_per_second")


NOT_BUILT = """
import importlib.util, json, os, sys

class NotBuilt:  # the compiled modules as without a C compiler: sample.py as Python, no scan
    def find_spec(self, name, path, target=None):
        if name in ("training_monitor.replay.scan", "training_monitor.replay.sample"):
            src = os.path.join(path[0], name.rsplit(".", 1)[1] + ".py")
            if not os.path.exists(src):
                raise ImportError(f"{name} is not built")
            return importlib.util.spec_from_file_location(name, src)
        return None

sys.meta_path.insert(0, NotBuilt())
from training_monitor.replay import runner
assert runner.Batch is None and sys.modules["training_monitor.replay.sample"].__file__.endswith(".py")
from test_replay_fast import result
print(json.dumps([result(path, runner.ReplayOptions(checkpoint_every=50)) for path in sys.argv[1:]]))
"""


def test_without_the_compiled_reader_replay_reads_line_by_line(tmp_path):
    import json
    import os
    import subprocess
    import sys

    paths = []
    for seed in (1, 2):
        path = tmp_path / f"rank_{seed}.log"
        path.write_bytes(mindformers_log(random.Random(seed), 400))
        paths.append(path)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
    out = subprocess.run([sys.executable, "-c", NOT_BUILT, *map(str, paths)], capture_output=True, text=True,
                         env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("compiled reader is not built") == 1  # warned once, for the two logs
    fast = [result(path, ReplayOptions(checkpoint_every=50)) for path in paths]
    assert json.loads(out.stdout) == json.loads(json.dumps(fast))


def both(path, **options) -> tuple:
    """``result`` of ``path`` read through the compiled reader and line by line (or the errors)."""
    out = []
    for fast in (True, False):
        try:
            out.append(result(path, ReplayOptions(**options, fast=fast)))
        except ReplayError as exc:
            out.append(str(exc))
    return tuple(out)


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_every_corpus_log_gives_the_same_results_both_ways(path):
    fast, slow = both(path, checkpoint_every=10)
    assert fast == slow


def speed_benchmark():
    """``benchmarks/replay_speed.py`` as a module (its log generator)."""
    spec = importlib.util.spec_from_file_location("replay_speed", ROOT / "benchmarks" / "replay_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.parametrize("custom", [False, True], ids=["mindformers", "custom loop"])
def test_the_speed_benchmark_logs_give_the_same_results_both_ways(tmp_path, monkeypatch, custom):
    bench = speed_benchmark()
    path = tmp_path / "run.log"
    bench.generate(str(path), 3000, custom=custom)
    fast, slow = both(path)
    assert fast == slow and slow["steps"] >= 3000 and slow["anomalies"]
    for block in (97, 5000):  # blocks that cut lines anywhere
        assert result(path, ReplayOptions(block_bytes=block)) == slow
    if custom:  # the compiled reader took the step lines: the text parser read few of the lines, also when the
        # process has learned as many shapes of other logs as it keeps (they give way to this log's)
        monkeypatch.setattr(text, "_SHAPES", {str(i): (False, (), None) for i in range(text.MAX_SHAPES)})
        parsed = []
        parse = text.Parser.parse
        monkeypatch.setattr(text.Parser, "parse", lambda self, line: parsed.append(line) or parse(self, line))
        assert result(path, ReplayOptions()) == slow
        assert 0 < len(parsed) < slow["lines"] / 20


def test_the_same_run_as_a_mindformers_log_and_a_custom_loop_log_gets_the_same_rule_decisions(tmp_path):
    bench = speed_benchmark()
    decisions = []
    for custom in (False, True):
        path = tmp_path / f"run{custom}.log"
        bench.generate(str(path), 3000, custom=custom)
        decisions.append([(e.rule, e.step) for e in replay_file(str(path)).events if e.source == "rule"])
    assert decisions[0] == decisions[1] and len(decisions[0]) >= 8  # (MindFormers' NaN line is a trainer's report)


@pytest.mark.parametrize("block", [1 << 18, 40, 97, 130])
def test_a_trainer_message_across_two_plain_step_lines_is_read(tmp_path, block):
    # each line alone is a plain step line; across the wrap from a line ending in "found " the next one
    # completes Colossal-AI's "found inf during Adam step": an overflow message
    wrapped, ending = "inf during Adam step | Step {0}/100 | loss 2.{0}", "Step {0}/100 | loss 2.{0} | found "
    lines = [wrapped.format(s) for s in range(1, 6)] + [ending.format(s) for s in range(6, 11)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines + [wrapped.format(s) for s in range(11, 16)]) + "\n")
    fast, slow = both(path, block_bytes=block)
    assert fast == slow and slow["merged_lines"] == 1 and slow["steps"] == 14


@pytest.mark.parametrize("pending", [Silence.PENDING, 7])
def test_silence_takes_a_run_of_records_as_it_takes_each(pending):
    lines = [f"[2025-04-07 15:{i // 60 % 60:02d}:{i % 60:02d}] Step {i}\n" if i % 7 else f"Step {i}\n"
             for i in range(1000)]  # every 7th line without its time: no period there
    times = [line_time(line) for line in lines]
    params = {"factor": 10.0, "min_seconds": 60.0, "startup_seconds": 1800.0, "startup_steps": 3}
    for cut in ([3], [47, 2, 30, 17], [50, 1, 15, 16, 200, 700], [1] * 5 + [120, 33]):
        each, runs = Silence(params), Silence(params)
        each.PENDING = runs.PENDING = pending
        window: deque = deque(maxlen=50)  # the periods, each read at once
        done = 0
        for count in cut:
            for i in range(done, done + count):
                each.record(i, lines[i])
                if (i < 50 or (i + 1) % 16 == 0) and i and times[i - 1] and times[i] and times[i] > times[i - 1]:
                    window.append(times[i] - times[i - 1])
            runs.took(count, done + count - 1, lambda i, start=done: lines[start + i])
            done += count
            assert vars(runs) == vars(each)
            runs._settle()  # (both, so that they go on alike)
            each._settle()
            assert list(runs.periods) == list(window)


_NUMBER = st.one_of(*[st.floats(1, 9.999).map("{:.4f}".format)] * 6,  # mostly one width: one line shape
                    st.floats(-1e6, 1e6).map("{:.4f}".format), st.floats(0, 1e-3).map("{:.3e}".format),
                    st.sampled_from(["nan", "inf", "-inf", "NaN", "1,234.5", "1e999", "0", "65536.0", "2"]))
_LINE = st.fixed_dictionaries({
    "step": st.one_of(st.just(1), st.just(1), st.just(1), st.just(0), st.integers(-30, 3)),  # on, again, back
    "loss": _NUMBER, "lr": _NUMBER, "norm": _NUMBER,
    "scale": st.sampled_from([None, "x2", "/2", "same", "same", "same"]),
    "time": st.tuples(st.integers(1000, 1999), st.sampled_from(["ms", "ms", "ms", "ms", "ms", "s", ""])),
    "shape": st.sampled_from([0, 0, 0, 0, 1, 2, 3]),  # the usual line, without a grad norm, dict-like, fewer values
    "before": st.sampled_from([None] * 8 + ["overflow", "checkpoint", "eval", "blank", "time", "rank", "nan",
                                            "stamped", "default"]),
    "cut": st.one_of(st.none(), st.none(), st.none(), st.integers(1, 120)),  # a hard wrap at that column
    "space": st.booleans(),
    "decor": st.sampled_from([None] * 6 + ["ansi", "quote", "number", "rank", "crlf", "utf8", "tensor"]),
    "seconds": st.sampled_from([1, 1, 1, 2, 7, 4000]),  # since the line before (a long silence: a stall)
    "repeat": st.sampled_from([0, 0, 1, 3, 12]),  # lines of the same shape after it, other digits, a step on each
    "seed": st.integers(0, 1 << 16),
})


_BEFORE = {  # lines a custom loop prints between its step lines
    "overflow": "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {scale:.1f}",
    "checkpoint": "saving checkpoint at iteration {step}", "eval": "validation loss {loss}", "blank": "",
    "time": "Step {step}/1000 | data_wait 3ms", "rank": "[rank1]: Step {step}/1000 | loss 2.5 | time 10ms",
    "nan": "loss is NAN or INF, terminating training", "stamped": "[{date}] evaluating",
    "default": "[default1]:Step {step}/1000 | loss 2.5 | time 10ms"}
_DECOR = {"ansi": "\x1b[32m{}\x1b[0m", "quote": "> {}", "number": "[{i}] {}", "rank": "[rank0]:{}", "crlf": "{}\r",
          "utf8": "{} ✓", "tensor": "{} | mfu tensor(0.5, device='cuda:0')"}


def _digits(rng: random.Random, text: str) -> str:
    return "".join(str(rng.randint(1, 9)) if c.isdigit() else c for c in text)  # the same shape


def custom_log(lines: list) -> bytes:
    out, step, scale, clock = [], 0, 65536.0, 1744040067
    for i, first in enumerate(lines):
        rng = random.Random(first["seed"])
        for k in range(1 + first["repeat"]):
            d = first if k == 0 else {**first, "step": 1, "seconds": 1, "before": None,
                                      "scale": first["scale"] and rng.choice(["same"] * 4 + ["/2", "x2"]),
                                      **{f: _digits(rng, first[f]) for f in ("loss", "lr", "norm")}}
            step, scale, clock = _custom_line(out, i, d, step, scale, clock, last=k == first["repeat"])
    return "\n".join(out).encode() + b"\n"


def _custom_line(out: list, i: int, d: dict, step: int, scale: float, clock: int, last: bool) -> tuple:
    """Append the line of ``d`` (and the one before it) to ``out``: the step, loss scale and time after it."""
    step = max(0, step + d["step"])
    scale = {"x2": scale * 2, "/2": scale / 2}.get(d["scale"], scale)
    clock += d["seconds"]
    date = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(clock))
    if d["before"] is not None:
        out.append(_BEFORE[d["before"]].format(step=step, scale=scale / 2, loss=d["loss"], date=date))
    ms, unit = d["time"]
    fields = [f"loss {d['loss']}", f"lr {d['lr']}", f"grad_norm {d['norm']}",
              f"loss_scale {scale:.1f}" if d["scale"] is not None else "", f"time {ms}{unit}"]
    if d["shape"] == 1:
        del fields[2]
    if d["shape"] == 3:
        del fields[1:3]
    line = f"[{date}] Step {step}/1000 | " + " | ".join(filter(None, fields))
    if d["shape"] == 2:
        line = f"step={step}, " + ", ".join(f.replace(" ", "=") for f in filter(None, fields))
    line += " " if d["space"] else ""
    if d["decor"] is not None:
        line = _DECOR[d["decor"]].format(line, i=i)
    cut = d["cut"] if last else None
    out.extend([line[:cut], line[cut:]] if cut is not None and cut < len(line) else [line])
    return step, scale, clock


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_LINE, min_size=2, max_size=60), st.sampled_from([1 << 18, 97, 300]))
def test_custom_loop_logs_give_the_same_results_both_ways(tmp_path, lines, block):
    path = tmp_path / "train.log"
    path.write_bytes(custom_log(lines))
    fast, slow = both(path, checkpoint_every=5, block_bytes=block)  # blocks that cut lines anywhere
    assert fast == slow
