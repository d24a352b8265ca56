"""deploy/: the Prometheus and Alertmanager configuration passes the real tools (promtool, amtool), the
alert rules pass their unit tests (and those tests catch a broken rule), every alert links a runbook page
that exists, and a real Prometheus renders the runbook links from the configured external label."""
import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from training_monitor.ruleset import Rules

ROOT = Path(__file__).resolve().parent.parent
PROM = ROOT / "deploy" / "prometheus"
AM = ROOT / "deploy" / "alertmanager"
RUNBOOKS = ROOT / "runbooks"
# how every runbook_url starts: the external label runbook_base, or the repository folder without it
BASE = "{{ with $externalLabels.runbook_base }}{{ . }}{{ else }}runbooks{{ end }}/"


def run(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, cwd=cwd)


def rule_groups(path: Path = PROM / "alerts.yml") -> list[dict]:
    return yaml.safe_load(path.read_text())["groups"]


def alerts(path: Path = PROM / "alerts.yml") -> dict[str, dict]:
    return {r["alert"]: r for g in rule_groups(path) for r in g["rules"] if "alert" in r}


# ------------------------------------------------------------------------------------------ the real tools
@pytest.mark.slow
def test_prometheus_config_passes_promtool(promtool):
    out = run(promtool, "check", "config", PROM / "prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 1 rule files found" in out.stdout, out.stdout  # the rule file is loaded and checked


@pytest.mark.slow
def test_alert_rules_pass_promtool(promtool):
    out = run(promtool, "check", "rules", PROM / "alerts.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    n = sum(len(g["rules"]) for g in rule_groups())
    assert f"SUCCESS: {n} rules found" in out.stdout, out.stdout


@pytest.mark.slow
def test_alert_rule_unit_tests_pass(promtool):
    out = run(promtool, "test", "rules", PROM / "alerts_test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("old, new", [
    # the straggler's time between steps is judged against the median rank's, by a margin of 20 % of the period
    ("quantile by (run) (0.5, run_rank:train_data_wait_duration_seconds:mean5m)",
     "avg by (run) (run_rank:train_data_wait_duration_seconds:mean5m)"),
    ("ratio5m > 0.2", "ratio5m > 0.05"),
    # the TPS reference leaves out the last 15 minutes, and zero rates are not recorded
    ("[1h] offset 15m)", "[1h])"),
    ("max by (run) (rate(train_tokens_total[5m])) > 0", "max by (run) (rate(train_tokens_total[5m]))"),
    # fp16 calibration at the start of a run is not a storm
    ("\n          and on (job, instance)\n          train_step_duration_seconds_count offset 10m >= 20", ""),
    # the engine rule's severity follows the default rules
    ("nan_inf|loss_spike|", "nan_inf|"),
    # a stall needs a live target
    ("\n          and on (job, instance)\n          up == 1", ""),
    # a run that ended stops its low-MFU alert at once; a sink's failure before the first scrape is seen
    ("\n          and on (run) group by (run) (train_mfu_ratio)", ""),
    ("\n          or\n          (train_alerts_total{outcome=~\"failed|dropped\"} > 0\n"
     "           unless train_alerts_total{outcome=~\"failed|dropped\"} offset 15m)", ""),
])
def test_the_unit_tests_catch_a_broken_rule(promtool, tmp_path, old, new):
    """A unit test that cannot fail proves nothing: each of these changes must make promtool test fail."""
    text = (PROM / "alerts.yml").read_text()
    assert text.count(old) == 1, f"{old!r} is not once in alerts.yml"
    (tmp_path / "alerts.yml").write_text(text.replace(old, new))
    shutil.copy(PROM / "alerts_test.yml", tmp_path / "alerts_test.yml")
    assert run(promtool, "check", "rules", tmp_path / "alerts.yml").returncode == 0  # still valid rules
    out = run(promtool, "test", "rules", tmp_path / "alerts_test.yml")
    assert out.returncode != 0, f"alerts_test.yml does not notice {old!r} -> {new!r}"


@pytest.mark.slow
def test_alertmanager_config_passes_amtool(amtool):
    path = AM / "alertmanager.yml"
    out = run(amtool, "check-config", path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    # every alert, critical or warning, ends at the relay
    for labels in (["alertname=TrainingAnomaly", "run=r", "rule=nan_inf", "severity=critical"],
                   ["alertname=TrainingThroughputDrop", "run=r", "severity=warning"]):
        out = run(amtool, "config", "routes", "test", f"--config.file={path}", "--verify.receivers=relay", *labels)
        assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_amtool_rejects_a_broken_config(amtool, tmp_path):
    cfg = yaml.safe_load((AM / "alertmanager.yml").read_text())
    cfg["route"]["receiver"] = "nobody"
    (tmp_path / "am.yml").write_text(yaml.safe_dump(cfg))
    assert run(amtool, "check-config", tmp_path / "am.yml").returncode != 0


# ------------------------------------------------------------------------------------------ the contents
def test_prometheus_config_wiring():
    cfg = yaml.safe_load((PROM / "prometheus.yml").read_text())
    assert cfg["rule_files"] == ["alerts.yml"]
    (am,) = cfg["alerting"]["alertmanagers"]
    assert am["static_configs"][0]["targets"] == ["127.0.0.1:9093"]
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "training"]
    (relay,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "monitor-relay"]
    assert relay["static_configs"][0]["targets"] == ["127.0.0.1:9095"]  # where `monitor relay` listens by default
    assert job["honor_labels"] is True  # the exposition's run/rank stay run/rank, not exported_run
    (sd,) = job["file_sd_configs"]
    assert all(f.endswith("/*.json") for f in sd["files"])
    assert cfg["global"]["scrape_interval"] == "15s"
    assert cfg["global"]["external_labels"]["runbook_base"] == "runbooks"
    # the alert on the engine's counter: no `for`, and scrape + evaluation within the ~30 s budget
    (engine,) = [g for g in rule_groups() if any(r.get("alert") == "TrainingAnomaly" for r in g["rules"])]
    assert alerts()["TrainingAnomaly"]["for"] in ("0s", "0m", 0)
    assert int(engine["interval"].rstrip("s")) + int(cfg["global"]["scrape_interval"].rstrip("s")) <= 30


def test_alertmanager_config_contents():
    cfg = yaml.safe_load((AM / "alertmanager.yml").read_text())
    assert cfg["route"]["group_by"] == ["run", "alertname"]
    hooks = [h for r in cfg["receivers"] for h in r.get("webhook_configs", [])]
    assert [h["url"] for h in hooks] == ["http://127.0.0.1:9095/alerts"]
    assert all(h["send_resolved"] is True for h in hooks)


def test_alertmanager_sends_one_message_for_an_engine_event_and_the_rule_of_the_same_condition(tmp_path):
    """The shipped inhibit rules in a real Alertmanager: while the engine's TrainingAnomaly for a stall fires,
    Prometheus' TrainingStalled for that rank is suppressed (one chat message), another rank's is not."""
    from services import http_json, start_alertmanager
    from test_e2e_alerting import alertmanager_config

    token = tmp_path / "token"
    token.write_text("unused")
    am, url = start_alertmanager(str(tmp_path), alertmanager_config(9, str(token)))
    try:
        labels = [{"alertname": "TrainingAnomaly", "rule": "stall", "run": "r", "rank": "0", "severity": "critical"},
                  {"alertname": "TrainingStalled", "run": "r", "rank": "0", "severity": "critical"},
                  {"alertname": "TrainingStalled", "run": "r", "rank": "1", "severity": "critical"}]
        post = urllib.request.Request(f"{url}/api/v2/alerts", json.dumps([{"labels": x} for x in labels]).encode(),
                                      {"Content-Type": "application/json"})
        urllib.request.urlopen(post, timeout=5).close()  # 200, no body
        deadline = time.monotonic() + 20
        while True:
            states = {(a["labels"]["alertname"], a["labels"]["rank"]): a["status"]["state"]
                      for a in http_json(f"{url}/api/v2/alerts")}
            if len(states) == 3 and "unprocessed" not in states.values() or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        am.stop()
    assert states == {("TrainingAnomaly", "0"): "active", ("TrainingStalled", "0"): "suppressed",
                      ("TrainingStalled", "1"): "active"}


def test_every_alert_has_labels_annotations_and_a_runbook_page():
    rules = Rules()
    index = (RUNBOOKS / "README.md").read_text()
    found = alerts()
    assert set(found) == {"TrainingAnomaly", "TrainingStalled", "TrainingExporterDown", "TrainingThroughputDrop",
                          "TrainingLowMFU", "TrainingOverflowStorm", "TrainingRankStraggler", "TrainingAlertsUndelivered",
                          "AlertRelayUndelivered"}
    for name, rule in found.items():
        assert rule["labels"]["severity"] in ("warning", "critical") or name == "TrainingAnomaly", name
        notes = rule["annotations"]
        assert {"summary", "description", "value", "runbook_url"} <= set(notes), name
        url = notes["runbook_url"]
        assert url.startswith(BASE), (name, url)
        page = url[len(BASE):]
        assert f"`{name}`" in index, f"{name} missing from runbooks/README.md"
        if page == "{{ $labels.rule }}.md":  # one page per engine rule
            for rid in rules.rules:
                path = RUNBOOKS / f"{rid}.md"
                assert path.is_file(), f"{name} links runbooks/{rid}.md, which is missing"
                assert path.read_text().startswith(f"# `{rid}`")
            continue
        assert re.fullmatch(r"[a-z_]+\.md", page), (name, page)
        path = RUNBOOKS / page
        assert path.is_file(), f"{name}: runbook {path} missing"
        text = path.read_text()
        assert re.match(r"# `\w+`: ", text), f"{page}: first line must be '# `name`: ...'"
        assert f"`{name}`" in text, f"{page} does not name the alert {name}"
        assert f"({page})" in index


def test_anomaly_severity_follows_the_default_rules():
    template = alerts()["TrainingAnomaly"]["labels"]["severity"]
    (listed,) = re.findall(r'match "\^\(([a-z_|]+)\)\$" \$labels\.rule', template)
    rules = Rules().rules
    assert set(listed.split("|")) == {r for r, c in rules.items() if c.severity == "critical"}
    assert {c.severity for c in rules.values()} <= {"critical", "warning"}  # the template has no 'info'
    assert template.endswith("critical{{ else }}warning{{ end }}")
    # ... and so does the list in deploy/README.md
    text = " ".join((ROOT / "deploy" / "README.md").read_text().split())
    (named,) = re.findall(r"\(critical: ([^;]+); every other rule warning\)", text)
    assert set(re.findall(r"`(\w+)`", named)) == set(listed.split("|"))


def test_every_alert_has_firing_and_quiet_unit_tests():
    tests = yaml.safe_load((PROM / "alerts_test.yml").read_text())
    assert tests["rule_files"] == ["alerts.yml"]
    cases = [c for t in tests["tests"] for c in t.get("alert_rule_test", [])]
    for name in alerts():
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c["exp_alerts"] for c in mine), f"no unit test where {name} fires"
        assert any(not c["exp_alerts"] for c in mine), f"no unit test where {name} stays quiet"
        for c in mine:
            for a in c["exp_alerts"]:  # the links as promtool renders them (no external labels)
                assert a["exp_annotations"]["runbook_url"].startswith("runbooks/")
                assert (ROOT / a["exp_annotations"]["runbook_url"]).is_file()


# ------------------------------------------------------------------------------------------ a real Prometheus
@pytest.mark.slow
@pytest.mark.services
def test_real_prometheus_scrapes_file_sd_and_renders_the_runbook_base(tmp_path):
    """prometheus.yml with a deployer's runbook_base, a real exporter found through its file_sd target:
    the series keep their own run/rank labels, and one engine event becomes a firing TrainingAnomaly whose
    runbook_url is built from the external label (promtool's unit tests cannot set external labels)."""
    from services import http_json, start_prometheus, training_prometheus_config, wait_until
    from training_monitor.events import Event
    from training_monitor.file_sd import write_file_sd_target
    from training_monitor.metrics import Metrics

    base = "https://runbooks.example/training-monitor/runbooks"
    sd = tmp_path / "file_sd"
    cfg = training_prometheus_config(sd)
    cfg["global"]["external_labels"]["runbook_base"] = base

    metrics = Metrics(run="deploy-test", rank=3, rules=Rules().rules)
    assert metrics.serve("127.0.0.1", 0)
    prom = None
    try:
        write_file_sd_target(str(sd), "deploy-test", 3, "127.0.0.1", metrics.server.port)
        prom, url = start_prometheus(str(tmp_path), cfg)

        def series():
            return http_json(f"{url}/api/v1/query?query=train_anomalies_total%7Brule%3D%22loss_spike%22%7D")["data"]["result"]

        wait_until(series, 30, "the first scrape of the exporter")
        (s,) = series()
        assert set(s["metric"]) == {"__name__", "job", "instance", "run", "rank", "rule"}, s["metric"]
        assert (s["metric"]["run"], s["metric"]["rank"], s["metric"]["job"]) == ("deploy-test", "3", "training")

        metrics.on_event(Event(rule="loss_spike", step=151, onset_step=151, value=4.2, severity="critical",
                               message="loss 4.2"))
        t0 = time.monotonic()

        def firing():
            return [a for a in http_json(f"{url}/api/v1/alerts")["data"]["alerts"]
                    if a["labels"]["alertname"] == "TrainingAnomaly" and a["state"] == "firing"]

        wait_until(firing, 40, "TrainingAnomaly to fire")
        elapsed = time.monotonic() - t0
        (alert,) = firing()
    finally:
        if prom:
            prom.stop()
        metrics.close()
    assert elapsed < 30, f"TrainingAnomaly took {elapsed:.0f} s"
    assert alert["labels"]["rule"] == "loss_spike" and alert["labels"]["severity"] == "critical"
    assert alert["labels"]["rank"] == "3"
    assert alert["annotations"]["runbook_url"] == f"{base}/loss_spike.md"
    assert alert["annotations"]["summary"] == "Run deploy-test rank 3: engine rule loss_spike fired"
    assert (alert["annotations"]["step"], alert["annotations"]["value"]) == ("151", "4.2")  # the last event's


def test_a_file_sd_target_is_readable_by_the_prometheus_user(tmp_path):
    """Debian's Prometheus runs as its own user: the target file (written atomically) must get a plain file's
    permissions, 0666 less the umask, not a temporary file's 0600."""
    import os
    import stat

    from training_monitor.file_sd import write_file_sd_target

    old = os.umask(0o022)
    try:
        path = write_file_sd_target(str(tmp_path), "r", 0, "127.0.0.1", 9400)
        write_file_sd_target(str(tmp_path), "r", 0, "127.0.0.1", 9401)  # replaced: the same permissions
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r_rank0.json"]  # no temporary file left


def test_a_file_sd_target_of_a_wildcard_address_is_one_other_machines_reach(tmp_path):
    """``metrics_host: 0.0.0.0`` (the deploy guide's advice when Prometheus runs elsewhere) is advertised as
    this machine's name or default-route address, never a loopback one (a machine whose name maps to
    127.0.0.1, as this one's does, would otherwise send a remote Prometheus to its own localhost)."""
    import json

    from training_monitor.file_sd import write_file_sd_target
    from training_monitor.http import is_loopback

    for wildcard in ("0.0.0.0", "::"):
        [target] = json.loads(open(write_file_sd_target(str(tmp_path), "r", 0, wildcard, 9400)).read())
        host = target["targets"][0].rpartition(":")[0].strip("[]")
        assert host and not is_loopback(host), target
    [target] = json.loads(open(write_file_sd_target(str(tmp_path), "r", 1, "::1", 9401)).read())
    assert target["targets"] == ["[::1]:9401"]  # an IPv6 address in brackets


def test_two_jobs_of_one_run_name_are_warned_and_the_first_to_end_keeps_the_other_s_target(tmp_path, log_lines):
    """Two jobs started with the same ``run`` (the default ``default``) share ``<run>_rank0.json``: the second
    one's target replaces the first's with a warning (the first answers still), and the first's clean end does
    not remove the second's target. A file left by a process that is gone is replaced silently."""
    import socket

    from training_monitor.file_sd import remove_file_sd_target, write_file_sd_target

    with socket.socket() as a, socket.socket() as b:
        for s in (a, b):
            s.bind(("127.0.0.1", 0))
            s.listen()
        pa, pb = a.getsockname()[1], b.getsockname()[1]
        path = write_file_sd_target(str(tmp_path), "default", 0, "127.0.0.1", pa)
        assert not any("file_sd:" in line for line in log_lines)
        write_file_sd_target(str(tmp_path), "default", 0, "127.0.0.1", pb)
        assert any(f"names 127.0.0.1:{pa}, which still answers: another job of run 'default'" in line
                   for line in log_lines)
        remove_file_sd_target(path, pa)  # the first job ends cleanly: the second's target stays
        assert json.loads(Path(path).read_text())[0]["targets"] == [f"127.0.0.1:{pb}"]
        remove_file_sd_target(path, pb)
        assert not Path(path).exists()
    log_lines.clear()
    write_file_sd_target(str(tmp_path), "default", 0, "127.0.0.1", pa)  # both sockets closed: nothing answers
    write_file_sd_target(str(tmp_path), "default", 0, "127.0.0.1", pb)
    assert not any("file_sd:" in line for line in log_lines)


def test_the_shipped_relay_config_loads_its_sinks_from_the_environment():
    from training_monitor.alerts import AlertsConfig

    env = {"FEISHU_WEBHOOK": "https://open.feishu.cn/open-apis/bot/v2/hook/x", "FEISHU_SECRET": "s",
           "DINGTALK_WEBHOOK": "https://oapi.dingtalk.com/robot/send?access_token=x", "DINGTALK_SECRET": "s",
           "WECOM_WEBHOOK": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=x",
           "SLACK_WEBHOOK": "https://hooks.slack.com/services/T/B/x"}
    config, problems = AlertsConfig.load(str(ROOT / "deploy" / "relay.yaml"), environ=env)
    assert not problems and [s.type for s in config.sinks] == ["feishu", "dingtalk", "wecom", "slack"]
    assert config.runbook_base.startswith("https://")  # (the shipped rules' relative links go under it)
    config, problems = AlertsConfig.load(str(ROOT / "deploy" / "relay.yaml"), environ={})
    assert not config.sinks and len(problems) == 4  # each sink disabled with its own error line
