"""``monitor replay``'s report: would-be rollbacks against a real monitored run, the step-time / TPS / MFU
summary and its bounded sample, the progress bar, and the HTML report rendered by headless Debian Chromium."""
import json
import math
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require
from services import binary
from training_monitor.replay.tracks import Envelope, Sample

DATA = Path(__file__).parent / "data"
SPIKE = DATA / "megatron_ds_tr1_13b_spike_lossscale_01.log"
# Chromium as a test runs it: no sandbox (root in a container), no GPU, nothing fetched in the background
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "training_monitor.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


def short_history(tmp_path) -> Path:
    """The spike excerpt has 3 points before the climb; loss_spike wants 20 by default (see test_replay.py)."""
    rules = tmp_path / "short.yaml"
    rules.write_text("loss_spike:\n  min_history: 3\n")
    return rules


# --- would-be rollbacks -------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.mindspore
def test_would_be_rollbacks_are_the_live_runs_rollbacks(tmp_path):
    """A real MindSpore run rolls back twice and then stops (rollback budget); replaying its record log with
    the same checkpoint settings gives the same rollbacks (at step, to step) and the same stop."""
    require("mindspore")
    from train_helpers import train
    from training_monitor.callbacks import TrainingMonitor

    mon = TrainingMonitor(output_dir=str(tmp_path), metrics_port=None, checkpoint_every=10, healthy_after=10,
                          max_rollbacks=2, exit_on_stop=False)
    train([mon], steps=100, poison={44, 70, 90})  # NaN batches: trainer steps 45, 71, 91
    live = [(r["at_step"], r["to_step"]) for r in mon.rollbacks]
    assert live == [(45, 30), (56, 40)] and mon.stop_reason.startswith("rollback budget exhausted")

    records = tmp_path / "records_rank0.csv"
    out = cli("replay", "--json", "--checkpoint-every", 10, "--healthy-after", 10, "--max-rollbacks", 2, records)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert [(r["at_step"], r["to_step"]) for r in res["would_be_rollbacks"]] == live
    assert [r["lr_multiplier"] for r in res["would_be_rollbacks"]] == [0.5, 0.25]
    assert [(s["at_step"], s["reason"].split(":")[0]) for s in res["would_stop"]] == \
        [(int(re.search(r"anomaly at step (\d+)", mon.stop_reason)[1]), "rollback budget exhausted")]
    assert res["files"][0]["would_be_rollbacks"] == [{k: v for k, v in r.items() if k != "file"}
                                                     for r in res["would_be_rollbacks"]]

    text = cli("replay", "--checkpoint-every", 10, "--healthy-after", 10, "--max-rollbacks", 2, records).stdout
    assert "would roll back at step 45 to the checkpoint at step 30, LR x0.5 (now x0.5 of the schedule)" in text
    assert "would roll back at step 56 to the checkpoint at step 40, LR x0.5 (now x0.25 of the schedule)" in text
    assert "would have stopped the run at step 60: rollback budget exhausted" in text

    # the checkpoint interval not given: the same decisions, the target only bounded by the onset
    res = json.loads(cli("replay", "--json", "--max-rollbacks", 2, records).stdout)
    assert [(r["at_step"], r["to_step"], r["before_step"]) for r in res["would_be_rollbacks"]] == \
        [(45, None, 45), (56, None, 56)]
    assert "before step 45 (checkpoint interval not given)" in cli("replay", records).stdout


@pytest.mark.slow
def test_a_logged_spike_is_one_would_be_rollback_and_json_keeps_its_old_keys(tmp_path):
    rules = short_history(tmp_path)
    out = cli("replay", "--json", "--rules", rules, "--checkpoint-every", 10, "--healthy-after", 10, SPIKE)
    res = json.loads(out.stdout)
    # the spike fires at 29050 and again (same onset) at 29070: the logged run did not roll back, so the
    # second firing is the same excursion and asks for no second rollback
    assert [(a["step"], a["onset_step"]) for a in res["anomalies"] if a["rule"] == "loss_spike"] == \
        [(29050, 29050), (29070, 29050)]  # (with an overflow_storm at 29050: alert only)
    assert [(r["at_step"], r["to_step"], r["rules"]) for r in res["would_be_rollbacks"]] == \
        [(29050, 29030, ["loss_spike"])]
    assert res["would_stop"] == [] and res["rollbacks_without_checkpoint"] == []
    for key in ("format", "records", "skipped_lines", "anomalies", "files", "reports", "merged_lines", "lines",
                "skipped"):
        assert key in res
    # no healthy checkpoint yet (checkpoints every 100 steps): as live, no rollback, so each firing asks again
    res = json.loads(cli("replay", "--json", "--rules", rules, "--checkpoint-every", 100, SPIKE).stdout)
    assert res["would_be_rollbacks"] == [] and \
        [(m["at_step"], m["before_step"]) for m in res["rollbacks_without_checkpoint"]] == \
        [(29050, 29050), (29070, 29050)]


def test_a_stretch_of_nan_steps_is_one_excursion_and_one_would_be_rollback(tmp_path):
    # a logged run whose loss is NaN at steps 100-109 (it did not roll back): one excursion, from step 100
    log = tmp_path / "records.csv"
    log.write_text("step,loss\n" + "".join(f"{s},{'nan' if 100 <= s <= 109 else 2.0 + 0.01 * (s % 7)}\n"
                                           for s in range(1, 201)))
    res = json.loads(cli("replay", "--json", "--checkpoint-every", 25, "--healthy-after", 10, log).stdout)
    nan = [(a["step"], a["onset_step"]) for a in res["anomalies"] if a["rule"] == "nan_inf"]
    assert nan == [(s, 100) for s in range(100, 110)]
    assert [(r["at_step"], r["to_step"]) for r in res["would_be_rollbacks"]] == [(100, 75)]
    assert res["would_stop"] == []
    # the text summary names the excursion once (an on-call reader of a log of a thousand NaN steps)
    text = cli("replay", "--checkpoint-every", 25, "--healthy-after", 10, log).stdout
    assert text.count("nan_inf") == 2 and \
        "... and at 9 more steps of the same excursion, the last at step 109 (each in --json)" in text


def test_would_be_rollbacks_come_in_the_order_they_happened(tmp_path):
    """A logged run that rolled back repeats its step numbers: its second rollback (at step 35, after going
    back to 21) comes after its first (at 41), with the LR multipliers compounding in that order."""
    rng = random.Random(0)
    steps = [*range(1, 42), *range(21, 61)]
    lines = [f"step {s} | loss {'nan' if (i, s) in ((40, 41), (55, 35)) else round(2 + 0.05 * rng.random(), 4)}\n"
             for i, s in enumerate(steps)]
    log = tmp_path / "went_back.log"
    log.write_text("".join(lines))
    res = json.loads(cli("replay", "--json", "--checkpoint-every", 10, "--healthy-after", 5, log).stdout)
    assert [(r["at_step"], r["lr_multiplier"]) for r in res["would_be_rollbacks"]] == [(41, 0.5), (35, 0.25)]


def test_the_would_be_ledger_stays_bounded_on_a_long_run():
    from training_monitor.events import Event
    from training_monitor.replay.policy import MAX_CHECKPOINTS, WouldBeRollbacks

    policy = WouldBeRollbacks(checkpoint_every=1, healthy_after=5)
    for step in range(1, 30_001):
        policy.after_step(step, [])
    assert len(policy.ledger.entries) <= MAX_CHECKPOINTS + 1 and policy.last_healthy == 29_995
    nan = Event("nan_inf", 30_001, 30_001, math.nan, "critical", "loss is nan", actions=["alert", "rollback"])
    policy.after_step(30_001, [nan])
    assert [(r["at_step"], r["to_step"]) for r in policy.rollbacks] == [(30_001, 29_995)]


# --- step time / TPS / MFU ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_step_time_quantiles_of_a_megatron_log():
    from training_monitor.replay import text

    log = DATA / "megatron_lm_gpt2_345m_normal_01.log"
    p = text.Parser()
    times = [r.step_time_s for r in map(p.feed, log.open()) if r is not None and r.__class__.__name__ == "StepRecord"]
    out = cli("replay", "--json", log)
    stats = json.loads(out.stdout)["files"][0]["stats"]
    assert set(stats) == {"step_time_s"}  # no tokens, no MFU in this log
    s = stats["step_time_s"]
    q = statistics.quantiles(times, n=20, method="inclusive")  # 5 %, 10 %, ..., 95 %
    assert (s["count"], s["sampled"]) == (13, 13)
    assert s["median"] == pytest.approx(statistics.median(times)) and s["p5"] == pytest.approx(q[0])
    assert s["p95"] == pytest.approx(q[-1])
    summary = cli("replay", log).stdout
    assert "step time  median 0.2909 s  p5 0.2853  p95 0.4368  (13 records)" in summary


@pytest.mark.slow
def test_tps_and_mfu_quantiles_from_a_record_log(tmp_path):
    csv = tmp_path / "records_rank0.csv"
    rows = ["step,loss,step_time_s,tokens,mfu"] + [
        f"{s},{3 - s / 1000},{0.5 + (s % 10) / 100},4096,{0.3 + (s % 7) / 100}" for s in range(1, 201)]
    csv.write_text("\n".join(rows) + "\n")
    stats = json.loads(cli("replay", "--json", csv).stdout)["files"][0]["stats"]
    tps = [4096 / (0.5 + (s % 10) / 100) for s in range(1, 201)]
    assert stats["tokens_per_second"]["median"] == pytest.approx(statistics.median(tps))
    assert stats["mfu"]["p95"] == pytest.approx(statistics.quantiles([0.3 + (s % 7) / 100 for s in range(1, 201)],
                                                                     n=20, method="inclusive")[-1])
    text = cli("replay", csv).stdout
    assert "TPS        median" in text and "tokens/s" in text and "MFU        median 33 %" in text


def test_the_quantile_sample_is_bounded_and_spread_over_the_whole_stream():
    rng = random.Random(1)
    values = [rng.lognormvariate(0, 0.3) * (1 + i / 500_000) for i in range(500_000)]  # drifts: order matters
    s = Sample(size=4096)
    for v in values:
        s.add(v)
    assert s.count == 500_000 and len(s.values) < 4096
    exact = statistics.quantiles(values, n=20, method="inclusive")
    median, p5, p95 = s.quantiles(0.5, 0.05, 0.95)
    assert median == pytest.approx(statistics.median(values), rel=0.02)
    assert p5 == pytest.approx(exact[0], rel=0.03) and p95 == pytest.approx(exact[-1], rel=0.03)


def test_the_plot_downsample_is_bounded_and_keeps_a_one_step_spike():
    env = Envelope(buckets=1000)
    for step in range(1, 1_000_001):
        env.add(step, 9.0 if step == 654_321 else -3.0 if step == 123_457 else 2.0 + math.sin(step / 5000))
    xs, ys = env.points()
    assert len(xs) <= 4000 and xs == sorted(xs) and xs[0] == 1 and xs[-1] == 1_000_000
    assert (654_321, 9.0) in zip(xs, ys) and (123_457, -3.0) in zip(xs, ys)


@pytest.mark.slow
def test_progress_bar_on_stderr_only_when_asked_or_on_a_terminal(tmp_path):
    log = DATA / "mindformers_llama2_13b_normal_01.log"
    shown = cli("replay", "--json", "--progress", log)
    assert "replay: 100%" in shown.stderr.replace("\r", "\n") and json.loads(shown.stdout)["steps"] == 5
    quiet = cli("replay", "--json", log).stderr  # stderr is a pipe here and the input small
    assert "replay: " not in quiet and "%|" not in quiet


# --- HTML report --------------------------------------------------------------------------------------------

RENDERED = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => ({
    traces: p.querySelectorAll('.scatterlayer .trace').length,
    lines: [...p.querySelectorAll('.scatterlayer path.js-line')]
        .filter(l => /^M[^L]*L/.test(l.getAttribute('d') || '')).length,
    marks: [...p.querySelectorAll('.scatterlayer .textpoint text')].map(t => t.textContent).filter(t => t),
    points: p.querySelectorAll('.scatterlayer .points path.point').length,
    annotations: [...p.querySelectorAll('.annotation-text')].map(t => t.textContent),
    titles: [...p.querySelectorAll('.g-gtitle, .annotation-text')].map(t => t.textContent),
    shapes: p.querySelectorAll('.shapelayer path').length}))"""


def render(path: Path, wait_s: float = 20) -> tuple[list, list]:
    """Open ``path`` in headless Debian Chromium (Playwright, the system browser, no network); return what each
    plot drew (waiting up to ``wait_s`` for a first trace) and every request the page made."""
    require("playwright")
    from playwright.sync_api import sync_playwright

    chromium = binary("chromium")
    requests = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", lambda route: (requests.append(route.request.url),
                                              route.continue_() if route.request.url.startswith("file:")
                                              else route.abort()))
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            try:
                page.wait_for_function("document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length"
                                       " > 0", timeout=wait_s * 1000)
            except Exception:
                pass  # nothing drawn: the caller's assertions say what is missing
            return page.evaluate(RENDERED), requests
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.services
def test_html_report_renders_offline_with_plots_anomalies_and_rollbacks(tmp_path):
    report = tmp_path / "report.html"
    out = cli("replay", "--rules", short_history(tmp_path), "--checkpoint-every", 10, "--healthy-after", 10,
              "--html", report, SPIKE, DATA / "mindformers_llama2_13b_normal_01.log")
    assert out.returncode == 0, out.stderr
    assert f"wrote {report}" in out.stderr
    page = report.read_text()
    assert "<script src=" not in page and "<link " not in page  # plotly.js is inside the file

    plots, requests = render(report)
    assert requests == [report.as_uri()], f"the report fetched something: {requests}"
    assert len(plots) == 2, plots  # one figure per log
    spike, mf = plots
    # the spike log: loss, grad norm, loss scale, step time, each a drawn line, plus the anomaly marks
    assert spike["lines"] >= 4 and spike["traces"] >= 5, spike
    assert spike["marks"] == ["loss_spike", "loss_spike", "overflow_storm"], spike["marks"]
    assert spike["points"] >= 2
    assert any("would roll back to step 29030, LR x0.5" in a for a in spike["annotations"]), spike["annotations"]
    assert spike["shapes"] >= 5  # onset-to-detection band, rollback line and band on each row
    assert {"Loss", "Grad norm", "Loss scale", "Step time (s)"} <= set(spike["titles"])
    # the healthy MindFormers log: its plots, no marks
    assert mf["lines"] >= 4 and mf["marks"] == [], mf
    assert "Anomalies: 3" in page and "would roll back at step 29050 to the checkpoint at step 29030" in page


@pytest.mark.slow
@pytest.mark.services
def test_the_render_check_fails_when_the_plots_or_marks_are_missing(tmp_path):
    """The browser check is not vacuous: a report whose plotly.js is cut out draws nothing, and one without
    anomalies has no marks."""
    report = tmp_path / "report.html"
    assert cli("replay", "--rules", short_history(tmp_path), "--html", report, SPIKE).returncode == 0
    page = report.read_text()
    start = page.index("<script type='text/javascript'>") + len("<script type='text/javascript'>")
    broken = tmp_path / "broken.html"
    broken.write_text(page[:start] + page[page.index("</script>", start):])
    plots, _ = render(broken, wait_s=2)
    assert plots == [] or all(p["lines"] == 0 and p["marks"] == [] for p in plots)
    calm = tmp_path / "calm.html"
    quiet = tmp_path / "quiet.yaml"
    quiet.write_text("loss_spike:\n  enabled: false\noverflow_storm:\n  enabled: false\n")
    assert cli("replay", "--rules", quiet, "--html", calm, SPIKE).returncode == 0  # the rules that fire, off
    (plot,) = render(calm)[0]
    assert plot["lines"] >= 4 and plot["marks"] == []


@pytest.mark.slow
def test_html_report_size_does_not_grow_with_the_log(tmp_path):
    """20x more steps, the same page size: the plots hold the bounded downsample, never every point."""
    def log(n):
        path = tmp_path / f"run{n}.log"
        with path.open("w") as f:
            for s in range(1, n + 1):
                loss = 9.0 if s == n // 2 else 3 + 5 * math.exp(-s / 3000) + 0.01 * math.sin(s)
                f.write(f"2025-04-07 15:34:27,308 - [callback.py:529] - INFO - {{ Epoch:[  1/  1], step:[{s:6d}/{n}],"
                        f" loss: {loss:.4f}, per_step_time: {1750 + s % 7}ms, lr: 1e-05, overflow cond: False, "
                        f"loss_scale: 1.0, global_norm: [{1 + (s % 5) / 10}]\n")
        return path
    sizes = {}
    for n in (5_000, 100_000):
        out = tmp_path / f"r{n}.html"
        assert cli("replay", "--html", out, log(n)).returncode == 0
        sizes[n] = out.stat().st_size
    plotly_js = 4_000_000
    assert sizes[100_000] - plotly_js < 2 * (sizes[5_000] - plotly_js) + 200_000, sizes
    page = (tmp_path / "r100000.html").read_text()
    assert "loss_spike" in page and '"y":[' in page.replace(" ", "")


def test_html_needs_plotly_and_says_so(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from training_monitor.cli import main

    monkeypatch.setitem(sys.modules, "plotly", None)
    result = CliRunner().invoke(main, ["replay", "--html", str(tmp_path / "r.html"),
                                       str(DATA / "mindformers_llama2_13b_normal_01.log")])
    assert result.exit_code == 2 and "--html needs plotly: pip install 'training-monitor[replay]'" in result.output
    assert not (tmp_path / "r.html").exists()


def test_html_report_lists_and_marks_one_excursion_once(tmp_path):
    # a NaN on every record (ultralytics/yolov5 issue #8421): three events, one excursion, as the text summary says
    log = DATA / "reallogs/tune/yolov5_transformer_tqdm_epochs_36_38_of_299_box_obj_cls_nan_map_zero_ultralytics8421.log"  # noqa: E501
    report = tmp_path / "report.html"
    out = cli("replay", "--html", report, log)
    assert out.returncode == 0, out.stderr
    assert "and at 2 more steps of the same excursion, the last at step 38" in out.stdout
    page = report.read_text()
    assert "Anomalies: 3, 1 excursion</h3>" in page and page.count("<td>nan_inf</td>") == 1
    assert "(and at 2 more steps of the same excursion, the last at step 38)" in page
