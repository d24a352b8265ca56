"""Real 2-rank CPU jobs launched with MindSpore's msrun: per-rank /metrics, file_sd, and a hang."""
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from training_monitor.replay.runner import replay_paths

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

JOB = Path(__file__).parent / "jobs" / "two_ranks.py"


def free_port_pair():
    """A base port whose next port is free too."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base < 65000:
            try:
                with socket.socket() as a, socket.socket() as b:
                    a.bind(("127.0.0.1", base))
                    b.bind(("127.0.0.1", base + 1))
                return base
            except OSError:
                continue
    raise RuntimeError("no free port pair")


def launch(tmp_path, mode):
    msrun = shutil.which("msrun", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    assert msrun, "msrun comes with mindspore"
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    base = free_port_pair()
    cmd = [msrun, "--worker_num=2", "--local_worker_num=2", f"--master_port={free_port_pair()}",
           f"--log_dir={tmp_path / 'logs'}", "--join=True", str(JOB), str(tmp_path), str(base), mode]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, cwd=tmp_path)
    return proc, base


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def wait_for(predicate, timeout, proc, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        assert proc.poll() is None or proc.returncode == 0, f"job died while waiting for {what}"
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def samples(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return text, {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}


def test_two_ranks_serve_their_own_series_and_file_sd(tmp_path, promtool):
    proc, base = launch(tmp_path, "train")
    try:
        sd = tmp_path / "file_sd"
        files = wait_for(lambda: sorted(sd.glob("*.json")) if len(list(sd.glob("*.json"))) == 2 else None,
                         180, proc, "both ranks' file_sd targets")
        targets = [json.loads(f.read_text())[0] for f in files]
        assert [t["labels"] for t in targets] == [{"run": "msrun-test", "rank": "0"}, {"run": "msrun-test", "rank": "1"}]
        assert [t["targets"] for t in targets] == [[f"127.0.0.1:{base}"], [f"127.0.0.1:{base + 1}"]]
        for rank, t in enumerate(targets):
            url = f"http://{t['targets'][0]}/metrics"
            wait_for(lambda url=url: samples(url)[1].get("train_step") and samples(url)[1]["train_step"].value >= 20,
                     120, proc, f"rank {rank} at step 20")
            text, s = samples(url)
            assert s["train_step"].labels == {"run": "msrun-test", "rank": str(rank)}
            assert s["train_tokens_per_second"].value > 100  # 128 tokens per step, well under a second each
            assert s["train_tokens_per_second_per_device"].value == pytest.approx(
                s["train_tokens_per_second"].value / 2)
            assert 0 < s["train_loss"].value < 10
            out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            assert out.returncode == 0, out.stdout + out.stderr
        (tmp_path / "release").write_text("scraped")
        assert proc.wait(180) == 0
        assert list(sd.glob("*.json")) == [], "file_sd targets removed at a clean end"
    finally:
        stop(proc)


def test_the_straggler_measure_names_the_rank_the_others_wait_for(tmp_path):
    """Rank 1's loader takes 0.2 s a batch. In data parallel training rank 0 then waits for it inside its step
    (the gradient AllReduce): rank 0's step time is the long one, rank 1's time between steps. A real Prometheus
    with the shipped rules, scraping both ranks, puts rank 1 over TrainingRankStraggler's margin, not rank 0."""
    from services import http_json, start_prometheus, training_prometheus_config, wait_until

    cfg = training_prometheus_config(tmp_path / "file_sd")
    proc, _ = launch(tmp_path, "slowdata")
    prom = None
    try:
        (tmp_path / "prom").mkdir()
        prom, url = start_prometheus(str(tmp_path / "prom"), cfg)

        def by_rank(expr):
            result = http_json(f"{url}/api/v1/query?query={urllib.parse.quote(expr)}")["data"]["result"]
            return {r["metric"]["rank"]: float(r["value"][1]) for r in result}

        wait_until(lambda: len(steps := by_rank('train_step{run="msrun-test"}')) == 2 and min(steps.values()) >= 150,
                   180, "both ranks past step 150")
        time.sleep(16)  # the rules' next evaluation (every 15 s) sees those steps
        ratio = by_rank('run_rank:train_data_wait_beyond_median:ratio5m{run="msrun-test"}')
        step = by_rank('run_rank:train_step_duration_seconds:mean5m{run="msrun-test"}')
        (tmp_path / "release").write_text("scraped")
        assert proc.wait(180) == 0
    finally:
        stop(proc)
        if prom:
            prom.stop()
    assert ratio["1"] > 0.2 and ratio["0"] < 0, ratio
    assert step["0"] > 2 * step["1"], step  # the step time of the rank that waits, not of the one it waits for


def test_a_rank_blocked_in_a_collective_reports_a_stall_with_its_stack(tmp_path):
    proc, base = launch(tmp_path, "hang")
    try:
        log = tmp_path / "events_rank1.jsonl"

        def stall_event():
            if log.exists():
                for line in log.read_text().splitlines():
                    event = json.loads(line)
                    if event.get("rule") == "stall":
                        return event
            return None

        t0 = time.time()
        event = wait_for(stall_event, 120, proc, "a stall event on rank 1")
        assert event["step"] == 8 and event["source"] == "watchdog" and event["severity"] == "critical"
        assert 2.0 <= event["value"] < 10  # allowance 2 s (min_seconds), checked every second
        assert "blocking_collective_rank1" in event["details"] and "AllReduce" in event["details"]
        assert time.time() - t0 < 120
        # the frozen rank still answers scrapes: Prometheus sees its last-step timestamp age
        text, s = samples(f"http://127.0.0.1:{base + 1}/metrics")
        assert s["train_step"].value == 8
        assert time.time() - s["train_last_step_timestamp_seconds"].value >= 2.0
        stalls = [x for f in text_string_to_metric_families(text) for x in f.samples
                  if x.name == "train_anomalies_total" and x.labels["rule"] == "stall"]
        assert [x.value for x in stalls] == [1]
    finally:
        stop(proc)


def summaries(tmp_path, mode):
    """Run the job ``mode`` to a clean end; the ranks' summaries (OUT/summary_rank<r>.json)."""
    proc, _ = launch(tmp_path, mode)
    try:
        assert proc.wait(240) == 0
    finally:
        stop(proc)
    return [json.loads((tmp_path / f"summary_rank{r}.json").read_text()) for r in (0, 1)]


def test_nan_on_one_rank_rolls_every_rank_back_to_the_same_checkpoint(tmp_path):
    s0, s1 = summaries(tmp_path, "nan")
    # the NaN is in rank 1's batch only; the reduced loss makes both ranks see it at step 45. Rules judging
    # each rank's own wall time (throughput, MFU, stalls) may differ between ranks on a busy machine.
    timed = ("throughput_drop", "low_mfu", "stall")
    shared = [[e for e in s["events"] if e[0] not in timed] for s in (s0, s1)]
    assert shared[0] == shared[1] and ["nan_inf", 45] in shared[0]
    strip = lambda rbs: [{k: v for k, v in rb.items() if k != "checkpoint"} for rb in rbs]  # noqa: E731
    assert strip(s0["rollbacks"]) == strip(s1["rollbacks"])
    (rb,) = s0["rollbacks"]
    assert (rb["at_step"], rb["to_step"], rb["lr_scale"]) == (45, 30, 0.5)
    assert s0["lr"] == s1["lr"] == pytest.approx(0.025)
    assert s0["final_step"] == s1["final_step"] == 60 - 15
    assert math.isfinite(s0["final_loss"]) and s0["final_loss"] == pytest.approx(s1["final_loss"])
    # the events carry the ranks' mean; each rank's own log line says what that rank saw: rank 1 went bad
    logs = [(tmp_path / "logs" / f"worker_{r}.log").read_text() for r in (0, 1)]
    seen = [re.search(r"nan_inf at step 45 .*\[this rank's own loss (\S+?)[,\]]", text) for text in logs]
    assert seen[1] and seen[1].group(1) == "nan", logs[1][-3000:]
    assert seen[0] and math.isfinite(float(seen[0].group(1))), logs[0][-3000:]


def test_a_target_that_fails_to_load_on_one_rank_is_skipped_by_all_with_one_lr_cut(tmp_path):
    # rank 1's step-30 checkpoint is truncated before the NaN at step 45: rank 0 loads its own copy, is overruled,
    # and both load step 20; the LR is cut once on both (rank 0 cut it twice before: 0.0125 against 0.025)
    s0, s1 = summaries(tmp_path, "corrupt")
    assert [(rb["at_step"], rb["to_step"], rb["lr_multiplier"]) for rb in s0["rollbacks"]] == [(45, 20, 0.5)]
    assert [(rb["at_step"], rb["to_step"], rb["lr_multiplier"]) for rb in s1["rollbacks"]] == [(45, 20, 0.5)]
    assert s0["lr"] == s1["lr"] == pytest.approx(0.025)
    assert s0["final_loss"] == pytest.approx(s1["final_loss"])
    logs = [(tmp_path / "logs" / f"worker_{r}.log").read_text() for r in (0, 1)]
    assert "failed to load on another rank" in logs[0] and "failed to load: " in logs[1]


def test_a_killed_rank_is_replayed_from_the_msrun_log_folder_as_timed_out_after_its_last_step(tmp_path):
    # rank 1 is killed at step 12; the scheduler's log (scheduler.log, beside the workers' worker_<r>.log) names
    # the ranks it timed out, and prints no step: replaying the folder places its reports after the steps the
    # ranks' own logs reached, as a reader of the folder would
    proc, _ = launch(tmp_path, "die")
    try:
        assert proc.wait(240) != 0
    finally:
        stop(proc)
    results = {os.path.basename(r.path): r for r in replay_paths([str(tmp_path / "logs")])}
    reached = {r: results[f"worker_{r}.log"].last.step for r in (0, 1)}
    assert reached[1] >= 11, results["worker_1.log"].to_dict()
    stalls = [e for e in results["scheduler.log"].events if e.rule == "stall"]
    assert stalls and {e.rank for e in stalls} <= {0, 1}, results["scheduler.log"].to_dict()
    for e in stalls:
        assert e.step == reached[e.rank] and e.message.endswith(f"after step {reached[e.rank]}"), e.message
