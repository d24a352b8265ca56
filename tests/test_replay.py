"""``monitor replay`` on real MindFormers log excerpts (tests/data, copied from shared samples) and bad input."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.replay import replay_file

DATA = Path(__file__).parent / "data"


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], capture_output=True, text=True,
                          timeout=120, input=stdin)


def test_llama31_gradnorm_log_reports_both_steps_and_the_stop():
    out = cli("replay", "--json", str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log"))
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["format"] == "mindformers" and res["records"] == 2
    norm = [a for a in res["anomalies"] if a["rule"] == "grad_norm_spike"]
    assert [(a["step"], a["value"]) for a in norm] == [(1, 44.313248), (2, 47.329006)]
    assert all(a["source"] == "trainer" for a in norm)
    assert "training stopped" in norm[1]["message"]
    assert res["skipped_lines"] == 4  # two progress lines and two is_skip lines
    # the log also prints "loss: 0.000" on both steps: a pretraining loss of exactly zero is degenerate
    assert [(a["rule"], a["step"]) for a in res["anomalies"] if a["rule"] == "loss_degenerate"] == \
        [("loss_degenerate", 1)]


def test_llama2_normal_log_has_no_nan_and_no_loss_spike():
    res = replay_file(str(DATA / "mindformers_llama2_13b_normal_01.log"))
    assert res.records == 5 and res.skipped_lines == 0
    assert not [e for e in res.events if e.rule in ("nan_inf", "loss_spike")]
    # quirks: "[1 31049]" is not a norm; "global_norm [10.579812]" without a colon is
    assert res.last.grad_norm == pytest.approx(16.986555) and res.last.step_time_s == pytest.approx(1.758)


def test_glm6b_sink_mode_calibration_overflows_are_not_a_storm():
    res = replay_file(str(DATA / "mindformers_glm6b_finetune_overflow_01.log"))
    assert res.records == 5 and res.events == []
    assert res.last.step == 124 and res.last.loss_scale == 16384.0 and res.last.overflow is False


def test_text_summary_lists_anomalies():
    out = cli("replay", str(DATA / "mindformers_llama31_8b_gradnorm_skip_01.log"))
    assert out.returncode == 0 and "grad_norm_spike" in out.stdout and "3 anomalies" in out.stdout


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


def test_unknown_format_name_and_bad_rules_file(tmp_path):
    log = str(DATA / "mindformers_llama2_13b_normal_01.log")
    out = cli("replay", "--format", "tensorflow", log)
    assert out.returncode == 2 and "'tensorflow' is not one of 'auto', 'mindformers', 'csv'" in out.stderr
    rules = tmp_path / "r.yaml"
    rules.write_text("loss_spike:\n  window: -3\n")
    out = cli("replay", "--rules", str(rules), log)
    assert out.returncode != 0 and f"{rules}:2: loss_spike.window" in out.stderr and "Traceback" not in out.stderr
    rules.write_text("loss_spike:\n  treshold: 3\n")
    out = cli("replay", "--rules", str(rules), log)
    assert "loss_spike.treshold: unknown setting (did you mean 'threshold'?" in out.stderr


def test_gzip_input_and_truncated_gzip(tmp_path):
    import gzip

    src = (DATA / "mindformers_llama2_13b_normal_01.log").read_bytes()
    good = tmp_path / "log.gz"
    good.write_bytes(gzip.compress(src * 50))
    assert replay_file(str(good)).records == 250
    cut = tmp_path / "cut.gz"
    cut.write_bytes(good.read_bytes()[:300])
    out = cli("replay", str(cut))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "truncated or corrupt" in out.stderr, out.stderr


def test_forced_format_with_no_step_lines_is_an_error(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("just some text\n" * 5)
    out = cli("replay", "--format", "mindformers", str(other))
    assert out.returncode == 2 and "no mindformers step lines found in 5 lines" in out.stderr
