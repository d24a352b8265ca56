"""``monitor replay`` on the real log excerpts in tests/data (copied from the shared samples), the runner (several
files and ranks, stdin, gzip, damaged input) and the command line."""
import gzip
import json
import math
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from training_monitor.replay import ReplayError, replay_file, replay_paths, text
from training_monitor.replay.base import Evaluation
from training_monitor.replay.runner import PARSERS, ReplayOptions
from training_monitor.replay.summary import as_text

DATA = Path(__file__).parent / "data"


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "training_monitor.cli", *args], capture_output=True, text=True,
                          timeout=120, input=stdin)


@pytest.mark.slow
def test_llama31_gradnorm_log_reports_both_steps_and_the_stop():
    out = cli("replay", "--json", str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log"))
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["format"] == "mindformers" and res["steps"] == 2
    norm = [a for a in res["anomalies"] if a["rule"] == "grad_norm_spike"]
    assert [(a["step"], a["value"]) for a in norm] == [(1, 44.313248), (2, 47.329006)]
    assert all(a["source"] == "trainer" for a in norm)
    assert "training stopped" in norm[1]["message"]
    assert res["skipped_lines"] == 2 and res["merged_lines"] == 2  # two progress lines; two is_skip lines
    # "is_skip: [ True]" after each step line: the batch was dropped, and the "loss: 0.000" printed for it is
    # no loss (not a degenerate one)
    assert len(res["anomalies"]) == 2


def test_llama2_normal_log_has_no_events():
    res = replay_file(str(DATA / "mindformers_llama2_13b_normal_01.log"))
    assert res.steps == 5 and res.skipped_lines == 0 and res.events == []
    # quirks: "[1 31049]" is not a norm; "global_norm [10.579812]" without a colon is
    assert res.last.grad_norm == pytest.approx(16.986555) and res.last.step_time_s == pytest.approx(1.758)


def test_glm6b_sink_mode_calibration_overflows_are_not_a_storm():
    res = replay_file(str(DATA / "mindformers_glm6b_finetune_overflow_01.log"))
    assert res.steps == 5 and res.events == []
    # each sink's summary line gives MindFormers' own per-step time (the excerpt's "..." hides 27 sinks, so
    # the step line's sink time over the steps since the line before would give 18 ms)
    assert res.merged_lines == 5 and res.last.step_time_s == pytest.approx(0.489567)
    assert res.stats.to_dict()["step_time_s"]["p5"] > 0.48
    assert res.last.step == 124 and res.last.loss_scale == 16384.0 and res.last.overflow is False


@pytest.mark.slow
def test_text_summary_lists_anomalies():
    out = cli("replay", str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log"))
    assert out.returncode == 0 and "grad_norm_spike" in out.stdout and "2 anomalies" in out.stdout
    # a CI gate: exit status 1 when an anomaly of the severity asked for, or a higher one, was found
    gate = cli("replay", "--fail-on", "warning", str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log"))
    assert gate.returncode == 1 and "exit status 1: 2 anomalies of severity warning or higher" in gate.stderr
    assert cli("replay", "--fail-on", "critical", str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log")).returncode == 0
    assert cli("replay", "--fail-on", "info", str(DATA / "mindformers_llama2_13b_normal_01.log")).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("name, content, expected", [
    ("nope.log", None, "no such file"),
    ("empty.log", b"", "empty file"),
    ("model.ckpt", bytes(range(256)) * 64, "binary file"),
    ("other.log", b"hello\nworld\n", "no known training-log format"),
])
def test_bad_input_gives_one_clear_line_and_nonzero_exit(tmp_path, name, content, expected):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    out = cli("replay", str(path))
    assert out.returncode != 0
    assert out.stderr.count("\n") == 1 and expected in out.stderr and str(path) in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


@pytest.mark.slow
def test_unknown_format_name_and_bad_rules_file(tmp_path):
    log = str(DATA / "mindformers_llama2_13b_normal_01.log")
    out = cli("replay", "--format", "tensorflow", log)
    choices = ", ".join(repr(c) for c in ["auto", *PARSERS])
    assert out.returncode == 2 and f"'tensorflow' is not one of {choices}" in out.stderr, out.stderr
    rules = tmp_path / "r.yaml"
    rules.write_text("loss_spike:\n  window: -3\n")
    out = cli("replay", "--rules", str(rules), log)
    assert out.returncode != 0 and f"{rules}:2: loss_spike.window" in out.stderr and "Traceback" not in out.stderr
    rules.write_text("loss_spike:\n  treshold: 3\n")
    out = cli("replay", "--rules", str(rules), log)
    assert "loss_spike.treshold: unknown setting (did you mean 'threshold'?" in out.stderr


@pytest.mark.slow
def test_gzip_input_and_truncated_gzip(tmp_path):
    src = (DATA / "mindformers_llama2_13b_normal_01.log").read_bytes()
    good = tmp_path / "log.gz"
    good.write_bytes(gzip.compress(src * 50))
    assert replay_file(str(good)).steps == 250
    cut = tmp_path / "cut.gz"
    cut.write_bytes(good.read_bytes()[:300])
    out = cli("replay", str(cut))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "truncated or corrupt" in out.stderr, out.stderr


@pytest.mark.slow
def test_forced_format_with_no_step_lines_is_an_error(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("just some text\n" * 5)
    out = cli("replay", "--format", "mindformers", str(other))
    assert out.returncode == 2 and "no mindformers step lines found in 5 lines" in out.stderr


# --- the other shared samples: what a person reading each log would name, and nothing on the healthy ones ---

def test_megatron_lm_normal_run_has_no_events():
    res = replay_file(str(DATA / "megatron_lm_gpt2_345m_normal_01.log"))
    assert res.format == "text" and res.steps == 13 and res.events == []
    # 7 validation lines: 5 at iterations, each an evaluation record (its `lm loss value`, not its PPL), and the
    # val and test data's at the end, after the one at iteration 5000 with no step line between: the same point
    # again, skipped as evaluation lines; the rest (dividers, memory report, "...", checkpoint messages) are other
    # lines. The log's records: 13 iteration lines + 5 validation lines (the sample's labels ask for at least 15)
    assert res.evaluations == 5 and res.records == 18 and res.skipped["summary or evaluation line"] == 2
    assert res.lines == 45
    parser = text.Parser()
    evaluations = [e for e in map(parser.feed, open(DATA / "megatron_lm_gpt2_345m_normal_01.log"))
                   if isinstance(e, Evaluation)]
    assert [(e.step, e.loss) for e in evaluations[:5]] == [(1000 * i, x) for i, x in enumerate(
        (6.439325, 6.18888, 6.826255, 7.609839, 8.208897), 1)]
    assert res.last.step == 5000 and res.last.loss == pytest.approx(0.1350079) and res.last.grad_norm == 0.706


def test_megatron_lm_startup_skips_are_calibration_overflows():
    from training_monitor.replay import text

    p = text.Parser()
    first = next(r for r in map(p.feed, (DATA / "megatron_lm_gpt2_345m_normal_01.log").open()) if r is not None)
    # 16 of the first 100 iterations were skipped while the scale fell from 2^32 to 2^17: the line stands for
    # overflowed and clean iterations both, so its overflow flag is unknown and its loss is judged
    assert (first.step, first.overflow, first.loss_scale, first.steps) == (100, None, 131072.0, 100)


def test_megatron_deepspeed_spike_is_a_loss_spike_at_the_climb(tmp_path):
    log = str(DATA / "megatron_ds_tr1_13b_spike_lossscale_01.log")
    res = replay_file(log)
    assert res.steps == 8 and res.skipped["no step fields"] == 7  # the "time (ms)" lines
    # The excerpt holds 3 logged points before the climb: too few for the robust test, but 2.77 -> 7.34 is an
    # unambiguous excursion. The scale's fall 65536 -> 8192 in that interval is 3 overflows (the lines print
    # no overflow flag): a storm.
    events = res.events
    assert {(e.rule, e.onset_step) for e in events} == {("loss_spike", 29050), ("overflow_storm", 29050)}
    first = events[0]  # 2.77 -> 7.34: the climb starts there (the excursion fires again after the cooldown)
    assert (first.step, first.onset_step) == (29050, 29050) and first.value == pytest.approx(7.343709)


def test_megatron_deepspeed_scale_drop_marks_intervals_with_overflows():
    from training_monitor.replay import text

    p = text.Parser()
    recs = [r for r in map(p.feed, (DATA / "megatron_ds_tr1_13b_spike_lossscale_01.log").open()) if r is not None]
    # Megatron-DeepSpeed prints 0 skipped iterations (DeepSpeed does the skipping): a falling scale tells that
    # the interval had overflows, mixed with clean iterations (unknown), a steady one that it had none
    assert [(r.step, r.loss_scale, r.overflow) for r in recs[2:6]] == \
        [(29040, 65536.0, False), (29050, 8192.0, None), (29060, 4096.0, None), (29070, 4096.0, False)]


def test_hf_deepspeed_normal_fine_tune_has_no_events():
    res = replay_file(str(DATA / "hf_deepspeed_trainer_normal_01.log"))
    assert res.format == "text" and res.steps == 8 and res.events == []
    # no progress bars in this excerpt: the steps are the count of loss lines, which the report says
    assert res.last.step == 8 and res.last.loss == 0.9321 and res.last.lr == 1e-05
    assert res.positional == 8 and res.to_dict()["positional_steps"] == 8
    assert "8 records (8 steps, 8 numbered by their place in the log, which names no step)" in as_text([res])


def test_deepspeed_overflows_that_no_step_number_places_are_not_taken_for_start_up():
    """The excerpt: 8 overflows in 5 s, the scale 2^32 -> 2^24, no step or loss line. Their steps are their
    positions in the log (1-8), not the trainer's: nothing says the run is at start-up, where overflows while
    the scale halves down from DeepSpeed's initial one are calibration (the healthy Megatron-LM run above skips
    16 iterations that way, by its iteration numbers). So they are overflowed steps like any: a storm."""
    res = replay_file(str(DATA / "deepspeed_zero2_overflow_storm_01.log"))
    assert res.format == "text" and res.steps == 8
    assert [(e.rule, e.step, e.onset_step, e.value) for e in res.events] == [("overflow_storm", 3, 1, 3.0)]
    assert res.last.step == 8 and res.last.overflow is True and res.last.loss_scale == 2.0 ** 25


def test_deepspeed_overflows_after_a_clean_step_are_an_overflow_storm(tmp_path):
    # DeepSpeed's progress line (engine.py _report_progress via log_dist): 100 steps, none skipped
    progress = "[2023-04-28 06:59:46,878] [INFO] [logging.py:96:log_dist] [Rank 0] step=100, skipped=0, " \
               "lr=[2.9e-05], mom=[(0.9, 0.999)]\n"
    log = tmp_path / "ds.log"
    log.write_text(progress + (DATA / "deepspeed_zero2_overflow_storm_01.log").read_text())
    res = replay_file(str(log))
    storms = [e for e in res.events if e.rule == "overflow_storm"]
    assert [(e.step, e.onset_step, e.value) for e in storms] == [(103, 101, 3.0)]



@pytest.mark.parametrize("step, storm", [(10, []), (17060, [(17055, 17053, 3.0)])])
def test_step_less_overflows_before_the_first_step_line_are_the_steps_just_before_it(tmp_path, step, storm):
    """The same 8 overflow messages, then DeepSpeed's progress line naming step ``step`` (the shape of
    DeepSpeed issue #931's start-up: its overflows, then ``step=10, skipped=6``). The messages were steps
    before that one: before step 10 they are a start-up's calibration; before step 17060 they are not."""
    progress = (f"[2023-04-28 06:59:46,878] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=8, "
                "lr=[2.9e-05], mom=[(0.9, 0.999)]\n")
    log = tmp_path / "ds.log"
    log.write_text((DATA / "deepspeed_zero2_overflow_storm_01.log").read_text() + progress)
    res = replay_file(str(log))
    assert res.last.step == step  # the progress line took over the last message's record
    assert [(e.step, e.onset_step, e.value) for e in res.events if e.rule == "overflow_storm"] == storm

# --- the runner: several files and ranks, stdin, damaged input, bounded memory ---

MF_LINE = ("2025-04-07 15:34:29,173 - [mindformers/core/callback/callback.py:529] - INFO - {{ Epoch:[  1/  2], "
           "step:[{step:5d}/ 1000], loss: {loss:.3f}, per_step_time: 1752ms, lr: 1e-05, overflow cond: False, "
           "loss_scale: 1.0, global_norm: [1.5], train_throughput_per_npu: 170.738T\n")
MF_PROGRESS = "2025-04-07 15:34:29,174 - [mindformers/core/callback/callback.py:531] - INFO -    0.2% |" \
              "                                                  | 0.17074 samples/s/p  0:28:23 }\n"


def mf_log(steps, spike_at=None, nan_at=None, start=1):
    out = []
    for s in range(start, start + steps):
        loss = math.nan if s == nan_at else 9.0 if s == spike_at else 3.0 - 0.001 * s + 0.01 * (s % 3)
        out += [MF_LINE.format(step=s, loss=loss), MF_PROGRESS]
    return "".join(out)


def test_folder_of_rank_logs_replays_each_rank_through_its_own_engine(tmp_path):
    log = tmp_path / "output" / "log"
    for rank in (0, 1):
        (log / f"rank_{rank}").mkdir(parents=True)
    (log / "rank_0" / "info.log.1").write_text(mf_log(40))               # rotated: the older part
    (log / "rank_0" / "info.log").write_text(mf_log(30, spike_at=60, start=41))
    (log / "rank_0" / "error.log").write_text("[ERROR] the same errors as info.log\n")
    (log / "rank_1" / "info.log").write_text(mf_log(70, nan_at=50))
    (log / "rank_1" / "model.ckpt").write_bytes(bytes(range(256)))      # not a log: not read
    (log / "rank_1" / "empty.log").write_text("")                       # empty: not read
    (log / "rank_1" / "notes.txt").write_text("restarted by hand\n")   # no format: reported, the rest replayed
    res = replay_paths([str(tmp_path / "output")])
    assert [(r.format, sorted(r.ranks), r.steps) for r in res] == \
        [("mindformers", [0], 70), ("mindformers", [1], 70), ("", [], 0)]
    assert "notes.txt: no known training-log format" in res[2].error
    assert res[0].path.endswith("info.log (+1 rotated)") and [Path(f).name for f in res[0].files] == ["info.log.1", "info.log"]
    assert [(e.rule, e.step, e.rank) for e in res[0].events] == [("loss_spike", 60, 0)]
    assert [(e.rule, e.step, e.rank) for e in res[1].events] == [("nan_inf", 50, 1)]
    # a folder whose only log is empty says so (a run that died before writing)
    (tmp_path / "died").mkdir()
    (tmp_path / "died" / "rank0.log").write_text("")
    with pytest.raises(ReplayError, match=r"died: the log files in this folder are empty \(1\)"):
        replay_paths([str(tmp_path / "died")])


def test_interleaved_rank_lines_in_one_file(tmp_path):
    # torchrun --tee prefixes every line with [default<local rank>]:
    r0, r1 = mf_log(40, spike_at=35).splitlines(True), mf_log(40).splitlines(True)
    lines = [f"[default{rank}]:{line}" for pair in zip(r0, r1) for rank, line in enumerate(pair)]
    path = tmp_path / "torchrun.log"
    path.write_text("".join(lines))
    res = replay_file(str(path))
    assert res.ranks == {0, 1} and res.steps == 80 and res.skipped["progress bar"] == 80
    assert [(e.rule, e.step, e.rank) for e in res.events] == [("loss_spike", 35, 0)]


@pytest.mark.slow
def test_stdin_dash(tmp_path):
    out = cli("replay", "--json", "-", stdin=(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log").read_text())
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["files"][0]["path"] == "<stdin>" and res["steps"] == 2 and len(res["anomalies"]) == 2


def test_damaged_text_never_crashes_and_every_line_is_counted(tmp_path):
    good = mf_log(30).encode()
    line = MF_LINE.format(step=31, loss=2.9).encode()
    at_loss, after_loss = line.index(b"loss:"), line.index(b"per_step_time")
    damaged = (good.replace(b"\n", b"\r\n", 10)                                   # CRLF for a while
               + b"\xff\xfe invalid utf-8 \xc3\x28 in the middle  \n"              # mixed encodings
               + line[:at_loss] + b"\n"                                            # cut before the loss
               + line.replace(b"31/", b"32/")[:after_loss] + b"\n"                 # hard-wrapped after the loss
               + line[after_loss:]
               + MF_LINE.format(step=33, loss=2.9).encode().rstrip(b"\n") + b"   \n"  # trailing spaces
               + MF_LINE.format(step=34, loss=2.9).encode() * 2                    # a line captured twice
               + MF_LINE.format(step=35, loss=2.9).encode()[:-40])                 # file ends mid-line
    path = tmp_path / "damaged.log"
    path.write_bytes(damaged)
    res = replay_file(str(path))
    text = damaged.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    assert res.lines == text.count("\n") + (not text.endswith("\n"))
    assert res.steps == 30 + 4 and res.last.step == 35  # 32 from its first half, 33, 34 once, 35 cut after the loss
    assert res.skipped["step line without loss"] == 1 and res.skipped["duplicate step"] == 1
    assert res.skipped["no step fields"] == 2  # the bad bytes line, the second half of the wrapped line


def test_an_error_names_the_file_and_line(tmp_path, monkeypatch):
    from training_monitor.replay import mindformers, runner

    def broken(self, line):
        if "step:[    3/" in line:
            raise RuntimeError("parser bug")
    monkeypatch.setattr(mindformers.Parser, "parse", broken)
    path = tmp_path / "x.log"
    path.write_text(mf_log(5).replace(", per_step_time", ",  per_step_time"))  # not the fast path's shape
    with pytest.raises(ReplayError, match=rf"{path}:5: cannot replay this line: RuntimeError\('parser bug'\)"):
        replay_file(str(path), fmt="mindformers")
    monkeypatch.undo()

    # the same from inside the compiled fast path: step 3 is judged when the line of step 4 (line 7) comes
    judged = runner._Run._judged

    def failing(self, st, rec, hits):
        if rec.step == 3:
            raise RuntimeError("bug after judging")
        judged(self, st, rec, hits)
    monkeypatch.setattr(runner._Run, "_judged", failing)
    path.write_text(mf_log(5))
    with pytest.raises(ReplayError, match=rf"{path}:7: cannot replay this line: RuntimeError\('bug after judging'\)"):
        replay_file(str(path), options=ReplayOptions(checkpoint_every=1))  # every step due: each goes to the run


def test_memory_stays_bounded(tmp_path):
    path = tmp_path / "long.log"
    path.write_text(mf_log(20000))  # 40000 lines; keeping the records would take several MB
    tracemalloc.start()
    try:
        res = replay_file(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.steps == 20000 and peak < 3_000_000, peak


def test_auto_detection_votes_and_format_forces(tmp_path):
    mixed = tmp_path / "mixed.log"
    megatron = (DATA / "megatron_lm_gpt2_345m_normal_01.log").read_text()
    mixed.write_text(MF_LINE.format(step=1, loss=2.0) + megatron)
    assert replay_file(str(mixed)).format == "text"  # 13 Megatron lines against 1 MindFormers line
    forced = replay_file(str(mixed), fmt="mindformers")
    assert forced.format == "mindformers" and forced.steps == 1


@pytest.mark.slow
def test_json_output_keeps_its_fields_and_adds_skip_reasons():
    out = cli("replay", "--json", str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log"),
              str(DATA / "megatron_lm_gpt2_345m_normal_01.log"))
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert {"format", "records", "skipped_lines", "anomalies", "files"} <= set(res)
    assert res["format"] == ["mindformers", "text"] and res["steps"] == 15
    assert res["skipped"]["progress bar"] == 2 and res["evaluations"] == 5
    assert res["merged_lines"] == 2 and res["records"] == 22  # 15 steps + 5 evaluations + 2 lines merged
    assert res["lines"] == 8 + 45 and res["reports"] == 2
    f0 = res["files"][0]
    assert f0["skipped"] == {"progress bar": 2} and f0["merged_lines"] == 2 and f0["ranks"] == [0]
    assert all(a["file"] for a in res["anomalies"])


@pytest.mark.slow
def test_text_summary_shows_format_counts_reasons_and_onsets():
    out = cli("replay", str(DATA / "megatron_lm_gpt2_345m_normal_01.log"),
              str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log"))
    assert out.returncode == 0, out.stderr
    first, *rest = out.stdout.splitlines()
    assert "text (rank 0), 18 records (13 steps, 5 evaluations), 0 trainer reports, 27 lines skipped (no step " \
           "fields 23, step line without loss 2, summary or evaluation line 2), 0 anomalies" in first
    assert "progress bar 2" in rest[0] and "2 anomalies" in rest[0]
    assert any("onset       2" in line and "grad_norm_spike" in line for line in rest)


@pytest.mark.slow
def test_replay_never_imports_mindspore():
    code = "import sys, training_monitor.cli, training_monitor.replay.runner; assert 'mindspore' not in sys.modules, sorted(sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_a_monitor_output_folder_is_replayed_from_its_record_logs(tmp_path):
    # the monitor's output folder holds three views of one run: the record log (every step the live engine
    # judged), the event log and the trainer's own log; the folder is replayed once, from the record logs
    out = tmp_path / "out"
    (out / "mindformers_log" / "rank_0").mkdir(parents=True)
    header = "step,loss,grad_norm,loss_scale,overflow,lr,step_time_s,data_wait_s,tokens,rank,timestamp,steps,mfu"
    for r in (0, 1):
        rows = [f"{s},{9.0 if s == 40 else 3.0 - 0.001 * s + 0.01 * (s % 3)},1.0,,,1e-4,1.0,,8192,{r},{1000 + s},1,"
                for s in range(1, 61)]
        (out / f"records_rank{r}.csv").write_text("\n".join([header, *rows]) + "\n")
        events = [{"rule": "loss_spike", "step": 40, "onset_step": 40, "value": 9.0, "message": "m", "rank": r,
                   "source": "rule", "time": 1040.1}]
        if r == 0:  # what the live monitor found outside the step records: the watchdog's stall after step 50
            events.append({"rule": "stall", "step": 50, "onset_step": 50, "value": 600.0, "message": "no step",
                           "rank": 0, "source": "watchdog", "time": 1050.5})
        events.append({"action": "rollback", "at_step": 40, "onset_step": 40, "to_step": 30, "lr_multiplier": 0.5,
                       "rules": ["loss_spike"], "lr_scale": 0.5, "checkpoint": f"ck/r{r}-30.ckpt", "rank": r,
                       "time": 1040.2})
        (out / f"events_rank{r}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (out / "mindformers_log" / "rank_0" / "info.log").write_text(mf_log(60, spike_at=40))
    results = replay_paths([str(tmp_path) + "/"])  # as a shell completes a folder's name
    assert [Path(r.path).name for r in results] == ["records_rank0.csv", "records_rank1.csv"]
    assert [[e.step for e in r.events if e.rule == "loss_spike"] for r in results] == [[40], [40]]
    assert [[(e.rule, e.step, e.source) for e in r.events if e.rule != "loss_spike"] for r in results] == [
        [("stall", 50, "watchdog")], []]
    # what the live monitor did, from the event log beside each record log
    assert [r.actions for r in results] == [[f"rank {r}: rolled back from step 40 to healthy checkpoint at step 30 "
                                             f"(ck/r{r}-30.ckpt), LR x0.5 (now x0.5 of the schedule)"] for r in (0, 1)]
    left = sorted(Path(p).name for p in results[0].left_out)
    assert left == ["events_rank0.jsonl", "events_rank1.jsonl", "info.log"]
    assert results[1].left_out == results[0].left_out
    done = cli("replay", "--json", str(out))
    assert done.returncode == 0 and json.loads(done.stdout)["files"][0]["left_out"] == list(results[0].left_out)
    assert done.stderr.count("note: monitor output folder") == 1 and "events_rank1.jsonl" in done.stderr


def test_a_utf16_log_is_read_as_text(tmp_path):
    """Windows PowerShell's `python train.py > log.txt` writes UTF-16LE with a byte-order mark: decoded, plain or
    gzipped, as the same lines."""
    import gzip

    text = "".join(f"step {s} | loss {'nan' if s == 30 else 2.5 - s / 100}\n" for s in range(1, 41))
    plain = tmp_path / "ps.log"
    plain.write_bytes(text.encode("utf-16"))
    assert plain.read_bytes()[:2] == b"\xff\xfe"
    packed = tmp_path / "ps.log.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-16-be").join([b"\xfe\xff", b""])))
    for path in (plain, packed):
        res = replay_file(str(path))
        assert (res.format, res.steps) == ("text", 40), path
        assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 30)]


def test_a_log_s_run_label_is_its_file_name_stem():
    from training_monitor.replay.sources import default_run

    named = {p: default_run(p) for p in ("rank_0/info.log.1.gz", "trainer_state.json", "log.md", "train.v2.log", "-")}
    assert named == {"rank_0/info.log.1.gz": "info", "trainer_state.json": "trainer_state", "log.md": "log",
                     "train.v2.log": "train.v2", "-": "stdin"}


def test_the_events_found_outside_the_records_are_read_bounded(tmp_path):
    from training_monitor.replay.eventlog import beside

    log = tmp_path / "events_rank0.jsonl"
    stall = {"rule": "stall", "value": 600.0, "message": "no step", "source": "watchdog"}
    log.write_text("".join(json.dumps({**stall, "step": s, "onset_step": s, "time": 1000.0 + s}) + "\n"
                           for s in range(50)) + json.dumps({**stall, "step": 60, "onset_step": 60, "source": "rule",
                                                            "time": 2000.0}) + "\n" + '{"action": "stop"}\n')
    assert [(t, r.step, r.source) for t, r in beside(str(log), events=3)[0]] == [
        (1000.0, 0, "watchdog"), (1001.0, 1, "watchdog"), (1002.0, 2, "watchdog")]
    assert len(beside(str(log))[0]) == 50  # the rule's event and the action are not outside the records
    assert beside(str(log))[1] == ["stop: "]  # the action: what the live monitor did
