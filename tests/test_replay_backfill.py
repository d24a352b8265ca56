"""``monitor replay --openmetrics``: the file follows OpenMetrics and has the live exporter's series, the real
``promtool tsdb create-blocks-from openmetrics`` loads it, and the real Prometheus then answers the logged values
at the logged times, and every Grafana dashboard expression on the backfilled run."""
import json
import os
import re
import subprocess
import sys
import urllib.parse
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.openmetrics.exposition import generate_latest

from services import http_json, start_prometheus
from training_monitor import openmetrics
from training_monitor.dashboards import DASHBOARDS, expressions
from training_monitor.metrics import STEP_BUCKETS, Metrics
from training_monitor.record import StepRecord
from training_monitor.replay import mindformers, text
from training_monitor.replay.clock import line_time
from training_monitor.ruleset import Rules

DATA = Path(__file__).parent / "data"
MF = DATA / "mindformers_llama2_13b_normal_01.log"  # lines carry their time: "2025-04-07 15:34:27,308 - ..."
MEGATRON = DATA / "megatron_ds_tr1_13b_spike_lossscale_01.log"  # no times: timed from --start-time
START = datetime(2025, 4, 7, 16, 0, tzinfo=UTC).timestamp()
SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\d+\.\d{3})')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def cli(*args):
    env = {**os.environ, "TZ": "UTC"}  # the logs' local times read as UTC
    return subprocess.run([sys.executable, "-m", "training_monitor.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


def records(parser, path):
    return [r for r in map(parser.feed, path.open()) if isinstance(r, StepRecord)]


def full_csv(path: Path) -> Path:
    """A record log in the monitor's own CSV format with every field (timed, 1 s steps), a loss spike at 40."""
    rows = ["step,loss,grad_norm,loss_scale,overflow,lr,step_time_s,data_wait_s,tokens,rank,timestamp,steps,mfu"]
    for s in range(1, 61):
        loss = 9.0 if s == 40 else 3.0 - 0.001 * s + 0.01 * (s % 3)
        rows.append(f"{s},{loss},{1 + (s % 4) / 10},65536.0,{s == 20},1e-4,{0.9 + (s % 5) / 50},0.02,8192,0,"
                    f"{START + 7200 + s},1,{0.35 + (s % 3) / 100}")
    path.write_text("\n".join(rows) + "\n")
    return path


def parse(text: str):
    """Check the OpenMetrics structure and return ``(types, helps, series)``: each family once with ``# TYPE`` and
    ``# HELP`` before its samples, each labelset's samples in one block, strictly increasing times per series,
    ``# EOF`` last; ``series[(name, labels)]`` is ``[(time, value)]``."""
    lines = text.split("\n")
    assert lines[-2:] == ["# EOF", ""] and text.count("# EOF") == 1
    types, helps, series = {}, {}, defaultdict(list)
    family, block, done = None, None, set()
    for line in lines[:-2]:
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ")
            assert family not in types, f"family {family} twice"
            types[family] = kind
            continue
        if line.startswith("# HELP "):
            name, doc = line[7:].split(" ", 1)
            assert name == family and doc and family not in helps
            helps[name] = doc
            continue
        m = SAMPLE.fullmatch(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value, t = m.groups()
        suffixes = {"gauge": [""], "counter": ["_total", "_created"], "histogram": ["_bucket", "_count", "_sum"]}
        assert name in [family + s for s in suffixes[types[family]]], (family, line)
        labels = dict(LABEL.findall(labels))
        key = (family, tuple(sorted((k, v) for k, v in labels.items() if k != "le")))
        if key != block:
            assert key not in done, f"labelset {key} split in two blocks"
            done.add(block)
            block = key
        points = series[(name, tuple(sorted(labels.items())))]
        assert not points or float(t) > points[-1][0], f"time not increasing: {line}"
        points.append((float(t), float(value)))
    return types, helps, series


@pytest.fixture(scope="module")
def backfill(tmp_path_factory):
    """One replay of the MindFormers and Megatron samples and a full record log into one OpenMetrics file."""
    tmp = tmp_path_factory.mktemp("backfill")
    rules = tmp / "short.yaml"
    rules.write_text("loss_spike:\n  min_history: 3\n")  # the Megatron excerpt's spike (see test_replay.py)
    om = tmp / "run.om"
    out = cli("replay", "--json", "--rules", rules, "--checkpoint-every", 10, "--healthy-after", 5, "--openmetrics",
              om, "--start-time", "2025-04-07T16:00:00+00:00", MF, MEGATRON, full_csv(tmp / "records_rank0.csv"))
    assert out.returncode == 0, out.stderr
    assert f"wrote {om}: " in out.stderr and "promtool tsdb create-blocks-from openmetrics" in out.stderr
    return tmp, om, json.loads(out.stdout)


@pytest.mark.slow
def test_the_file_is_openmetrics_with_the_live_exporters_series(backfill, promtool):
    tmp, om, res = backfill
    types, helps, series = parse(om.read_text())
    # the live exporter's families, types and help (a Metrics fed a step with every field, as live)
    live = Metrics("x", 0, rules=Rules.load().rules)
    live.on_record(StepRecord(1, 2.0, 1.0, 1.0, False, 1e-4, 0.5, 0.01, 100, 0, 1.0, 1, 0.4))
    live.set_healthy(0)
    exposed = generate_latest(live.registry).decode()
    live_types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposed, re.M))
    live_helps = dict(re.findall(r"^# HELP (\S+) (.+)$", exposed, re.M))
    assert types == live_types and helps == live_helps
    live_labels = {m.group(1): {k for k, _ in LABEL.findall(m.group(2))}
                   for m in re.finditer(r"^(\w+)\{(.*)\} ", exposed, re.M)}
    assert {name: {k for k, _ in labels} for name, labels in series} == live_labels
    runs = {dict(labels)["run"] for _, labels in series}
    assert runs == {"mindformers_llama2_13b_normal_01", "megatron_ds_tr1_13b_spike_lossscale_01", "records_rank0"}
    buckets = sorted({float(dict(lab)["le"]) for name, lab in series if name == "train_step_duration_seconds_bucket"})
    assert buckets[:-1] == [float(b) for b in STEP_BUCKETS]
    # promtool's exposition lint on the last point of every series, as the live exporter serves it (text 0.0.4)
    text = []
    for family, kind in types.items():
        names = [family + "_total", family + "_created"] if kind == "counter" else [family]
        for name in names:
            kind_04 = "gauge" if name.endswith("_created") else kind
            text += [f"# HELP {name} {helps[family]}", f"# TYPE {name} {kind_04}"]
            for (sample, labels), points in series.items():
                if sample == name or kind == "histogram" and sample.startswith(name + "_"):
                    text.append(f"{sample}{{{','.join(f'{k}={json.dumps(v)}' for k, v in labels)}}} {points[-1][1]!r}")
    out = subprocess.run([promtool, "check", "metrics"], input="\n".join(text) + "\n", capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_times_are_the_logs_own_or_counted_from_the_start_time(backfill):
    tmp, om, res = backfill
    _, _, series = parse(om.read_text())

    def loss(run):
        return next(p for (name, labels), p in series.items() if name == "train_loss" and ("run", run) in labels)

    # MindFormers: each step at its line's time (read as UTC here), with its loss
    mf = records(mindformers.Parser(), MF)
    stamps = [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
              for line in MF.open()]
    assert loss("mindformers_llama2_13b_normal_01") == [(pytest.approx(t), r.loss) for t, r in zip(stamps, mf)]
    # Megatron-DeepSpeed: no times; the first step ends one step time after --start-time, each next one its
    # interval (iterations x time per iteration) later
    mg = records(text.Parser(), MEGATRON)
    t, expected = START, []
    for i, r in enumerate(mg):
        t += r.step_time_s * (1 if i == 0 else r.steps)
        expected.append((pytest.approx(t, abs=0.002), r.loss))
    assert loss("megatron_ds_tr1_13b_spike_lossscale_01") == expected
    created = [p for (name, labels), p in series.items()
               if name == "train_anomalies_created" and ("run", "megatron_ds_tr1_13b_spike_lossscale_01") in labels]
    assert created and all(v == pytest.approx(START) for p in created for _, v in p)


@pytest.mark.slow
@pytest.mark.services
def test_promtool_backfills_it_and_prometheus_answers_the_logged_values(backfill, promtool):
    tmp, om, res = backfill
    data = tmp / "prom-data"
    out = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    proc, url = start_prometheus(str(tmp), {"global": {"scrape_interval": "15s"}})
    try:
        def query(expr, t):
            q = urllib.parse.urlencode({"query": expr, "time": f"{t:.3f}"})
            answer = http_json(f"{url}/api/v1/query?{q}")
            assert answer["status"] == "success", answer
            return answer["data"]["result"]

        # every MindFormers step: train_loss at the step's logged time is the logged loss
        for line, rec in zip(MF.open(), records(mindformers.Parser(), MF)):
            t = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
            (sample,) = query('train_loss{run="mindformers_llama2_13b_normal_01"}', t)
            assert float(sample["value"][1]) == rec.loss and sample["metric"]["rank"] == "0"
        # the Megatron spike at its counted time, and the counted anomalies and would-be healthy checkpoint
        mg = records(text.Parser(), MEGATRON)
        t = START + mg[0].step_time_s + sum(r.step_time_s * r.steps for r in mg[1:4])  # iteration 29050
        (sample,) = query('train_loss{run="megatron_ds_tr1_13b_spike_lossscale_01"}', t + 0.0005)
        assert float(sample["value"][1]) == pytest.approx(7.343709)
        end = START + mg[0].step_time_s + sum(r.step_time_s * r.steps for r in mg[1:])
        (spikes,) = query('train_anomalies_total{run="megatron_ds_tr1_13b_spike_lossscale_01",rule="loss_spike"}',
                          end + 0.0005)
        assert spikes["value"][1] == "2"  # fired at 29050 and again at 29070, as the replay reported
        assert [a["step"] for a in res["anomalies"] if a["file"] == str(MEGATRON) and a["rule"] == "loss_spike"] == \
            [29050, 29070]

        # the Grafana dashboards on the full record log, just after its spike at step 40: every panel has data,
        # except the rollback ones (a log does not say which rollbacks its run did: train_rollbacks_total is 0)
        at = START + 7200 + 50
        exprs = sorted({e for build in DASHBOARDS.values() for e in expressions(build())})
        empty = []
        for e in exprs:
            promql = e.replace("$run", "records_rank0").replace("$rank", ".*").replace("$__range", "1h")
            if not query(promql, at):
                empty.append(e)
        assert empty and all("train_rollbacks_total" in e and "> 0" in e for e in empty), empty
        (healthy,) = query('train_last_healthy_checkpoint_step{run="records_rank0"}', at)
        assert healthy["value"][1] == "30"  # checkpoints every 10 steps, healthy 5 clean steps after
    finally:
        proc.stop()


@pytest.mark.parametrize("line, when", [
    ("2025-04-07 15:34:27,308 - [mindformers/core/callback/callback.py:529] - INFO - { Epoch:[  1/  2], step:[    1/"
     "   19], loss: 10.649, per_step_time: 103328ms", (2025, 4, 7, 15, 34, 27, 308)),  # MindFormers console
    ("[INFO] 2025-04-07 15:34:27,308 [mindformers/core/callback/callback.py:529] print_output_info: { Epoch:[  1/  2], "
     "step:[    1/   19], loss: 10.649", (2025, 4, 7, 15, 34, 27, 308)),  # MindFormers' file handler
    (" [2024-05-30 10:21:44] iteration      100/    5000 | consumed samples:          800 | elapsed time per "
     "iteration (ms): 296.8 | lm loss: 9.729805E+00 |", (2024, 5, 30, 10, 21, 44, 0)),  # Megatron-LM since 2024
    ("[2023-04-12 10:53:24,519] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=8, lr=[0.0001], mom=[(0.9,"
     " 0.95)]", (2023, 4, 12, 10, 53, 24, 519)),  # DeepSpeed
    ("[WARNING] ME(2134:281473,MainProcess):2025-04-07-15:34:27.308.123 [mindspore/train/callback/_loss_monitor.py:"
     "90] epoch: 1 step: 1, loss is 10.6", (2025, 4, 7, 15, 34, 27, 308)),  # MindSpore
    ("[2022/10/08 02:55:35] ppcls INFO: [Train][Epoch 238/400][Iter: 80/98]lr(LinearWarmup): 0.00036136, CELoss: "
     "4.86863, loss: 4.86863, batch_cost: 0.48606s, reader_cost: 0.00083, ips: 263.34320 samples/s, eta: 2:08:45",
     (2022, 10, 8, 2, 55, 35, 0)),  # PaddleClas (tests/data/reallogs/tune/paddleclas_cait_xxs24_..._robinbg.log)
])
def test_line_times_of_the_trainers_prefixes(line, when):
    *date, ms = when
    assert line_time(line) == pytest.approx(datetime(*date).timestamp() + ms / 1000)  # local time, as printed
    assert line_time(" iteration      100/    5000 | consumed samples: 800 | lm loss: 9.7 |") is None
    assert line_time("[2022/10-08 04:06:38] mixed separators") is None


def test_a_megatron_line_with_its_time_prefix_is_timed_by_it():
    p = text.Parser()
    rec = p.feed(" [2024-05-30 10:21:44] iteration      100/    5000 | consumed samples:          800 | elapsed time "
                 "per iteration (ms): 296.8 | learning rate: 3.937E-06 | global batch size:     8 | lm loss: "
                 "9.729805E+00 | loss scale: 131072.0 | grad norm: 5.703 | number of skipped iterations:   0 | "
                 "number of nan iterations:   0 |")
    assert rec.loss == pytest.approx(9.729805) and rec.timestamp == datetime(2024, 5, 30, 10, 21, 44).timestamp()


def test_spooling_gives_the_same_file_whatever_the_buffer(tmp_path):
    def write(path, buffered=openmetrics.BUFFERED):
        w = openmetrics.OpenMetricsWriter(str(path), scrape_interval=0, rules=["loss_spike"], buffered=buffered)
        for rank in (0, 1):
            feed = w.feed("r", rank)
            for s in range(1, 30):  # ranks interleaved, as in a torchrun log
                feed.on_record(StepRecord(s, 3.0 - s / 100, rank=rank, step_time_s=0.5, timestamp=1000.0 + s), [])
        return w.close()
    whole = write(tmp_path / "whole.om")
    small = write(tmp_path / "small.om", buffered=7)
    assert (tmp_path / "whole.om").read_text() == (tmp_path / "small.om").read_text()
    assert whole["samples"] == small["samples"] > 2 * 29 * 3
    assert not list(tmp_path.glob(".openmetrics-*"))  # the spool folder is gone
    parse((tmp_path / "small.om").read_text())


@pytest.mark.slow
def test_a_failed_replay_leaves_no_file_and_no_spool(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    out = cli("replay", "--openmetrics", tmp_path / "out.om", bad)
    assert out.returncode == 2 and "no known training-log format" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    out = cli("replay", "--openmetrics", tmp_path / "no" / "such" / "out.om", MF)
    assert out.returncode == 2 and "cannot write" in out.stderr and "Traceback" not in out.stderr


def test_a_step_without_its_own_time_takes_the_last_one_known(tmp_path):
    # MindSpore's LossMonitor lines with TimeMonitor's `per step time` at each epoch's end: the steps after it are
    # placed that far apart, not 1 s (1 s only before any step time is known)
    from training_monitor.openmetrics import OpenMetricsWriter

    writer = OpenMetricsWriter(str(tmp_path / "run.om"), start_time=START)
    feed, times = writer.feed("r", 0), []
    for step, step_time in ((1, None), (2, None), (3, 0.1), (4, None), (5, None), (6, 0.2), (7, None)):
        feed.on_record(StepRecord(step, loss=2.0, step_time_s=step_time))
        times.append(feed.t)
    writer.discard()
    assert times == pytest.approx([1.0, 2.0, 2.1, 2.2, 2.3, 2.5, 2.7])
    assert os.listdir(tmp_path) == []
