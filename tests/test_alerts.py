"""Alert sinks against real HTTP endpoints on 127.0.0.1: payloads, signatures, rate limits, retries,
drops, secrets kept out of logs, and Alertmanager's real v2 API."""
import json
import math
import time

import pytest

from services import Receiver, http_json, secret, start_alertmanager, text_of, wait_until
from training_monitor.alerts import Alert, AlertsConfig, AlertSender
from training_monitor.engine import Engine
from training_monitor.record import StepRecord
from training_monitor.schema import ConfigError

SECRETS = {"feishu": "SEC-feishu-0123456789", "dingtalk": "SEC-dingtalk-0123456789"}


@pytest.fixture
def receiver():
    r = Receiver(SECRETS)
    yield r
    r.close()


def nan_alert(action="rolled back to the healthy checkpoint at step 20, LR x0.5 (now x0.5)"):
    engine = Engine()
    engine.offset = 15  # an earlier rollback undid 15 steps: the trainer counts this step 46
    (event,) = engine.observe(StepRecord(31, loss=math.nan, rank=3))
    return Alert.from_event(event, "llama-7b", action, "https://git.example/runbooks",
                            "https://grafana.example/d/overview?var-run={run}", time.time())


def sender(receiver, *sinks, **extra):
    env = {"HOOK": "unused", **{f"{k.upper()}_SECRET": v for k, v in SECRETS.items()}}
    cfg, problems = AlertsConfig.load({"sinks": list(sinks), **extra}, "test", env)
    assert not problems
    return AlertSender(cfg)


def test_every_platform_gets_its_format_with_all_the_facts_and_valid_signatures(receiver):
    u = receiver.url
    s = sender(receiver,
               {"name": "f", "type": "feishu", "url": f"{u}/feishu/hook", "secret_env": "FEISHU_SECRET"},
               {"name": "d", "type": "dingtalk", "url": f"{u}/dingtalk/robot/send?access_token=T0K",
                "secret_env": "DINGTALK_SECRET"},
               {"name": "w", "type": "wecom", "url": f"{u}/wecom/send?key=K3Y"},
               {"name": "s", "type": "slack", "url": f"{u}/slack/services/T/B/X"},
               {"name": "g", "type": "webhook", "url": f"{u}/webhook/in"})
    s.send([nan_alert()])
    for prefix in ("/feishu", "/dingtalk", "/wecom", "/slack", "/webhook"):
        (req,) = receiver.wait_for(prefix)
        text = text_of(req)
        for fact in ("nan_inf", "llama-7b", "31", "nan", "rolled back to the healthy checkpoint at step 20",
                     "https://git.example/runbooks/nan_inf.md", "https://grafana.example/d/overview?var-run=llama-7b"):
            assert fact in text, (prefix, fact, text)
        assert "rank" in text and "3" in text
        assert ('"trainer_step": 46' if prefix == "/webhook" else "31 (trainer step 46)") in text
    stats = s.close(2)
    assert all(st["sent"] == 1 and st["failed"] == 0 for st in stats.values()), stats


def test_wrong_secret_is_refused_counted_and_never_logged(receiver, log_lines):
    receiver.secrets = {"dingtalk": "the-real-one"}
    token = secret("T0KEN42")
    s = sender(receiver, {"name": "d", "type": "dingtalk", "url": f"{receiver.url}/dingtalk/send?access_token={token}",
                          "secret_env": "DINGTALK_SECRET"})
    s.send([nan_alert()])
    s.send([nan_alert()])
    stats = s.close(5)["d"]
    assert stats["failed"] == 2 and stats["sent"] == 0
    assert not receiver.delivered("/dingtalk")
    logs = "\n".join(log_lines)
    assert "sign not match" in logs and logs.count("refused") == 1  # reported once, counted twice
    assert SECRETS["dingtalk"] not in logs and "T0KEN42" not in logs and receiver.url not in logs


def test_rate_limit_groups_into_a_digest_instead_of_dropping(receiver):
    s = sender(receiver, {"name": "w", "type": "wecom", "url": f"{receiver.url}/wecom/send?key=K",
                          "rate_limits": [[1, 1.0]]})
    s.send([nan_alert()])
    receiver.wait_for("/wecom", 1)
    rules = ["loss_spike", "grad_norm_spike", "overflow_storm", "throughput_drop"]
    for rule in rules:
        s.send([Alert(rule, "warning", f"{rule} happened", run="r1", step=40, action=f"{rule} handled")])
    got = receiver.wait_for("/wecom", 2)
    stats = s.close(3)["w"]
    assert stats["sent"] == 5 and stats["dropped"] == 0 and len(receiver.delivered("/wecom")) == 2
    digest = text_of(got[1])
    assert "4 training alerts on r1" in digest and all(f"{r} happened -> {r} handled" in digest for r in rules)


def test_a_digest_lists_critical_alerts_first_and_names_every_alert_it_does_not_list():
    from training_monitor.alerts.platforms import MAX_LINES, PLATFORMS

    down = [Alert("TrainingExporterDown", "warning", f"rank {r} down", run="big", rank=r) for r in range(999)]
    text = PLATFORMS["slack"].text([*down, Alert("nan_inf", "critical", "loss is NaN", run="big", step=700)])
    lines = text.splitlines()
    assert lines[0] == "*1000 training alerts on big*" and "[CRITICAL] nan_inf on big" in lines[1]
    assert sum("rank " in line and "down" in line for line in lines) == MAX_LINES - 1
    assert lines[-1] == f"... and {1000 - MAX_LINES} more: [WARNING] TrainingExporterDown on big x{1000 - MAX_LINES}"
    # the title escaped once, as every other text (it was escaped twice: Slack showed `R&amp;D`)
    two = [Alert("nan_inf", "critical", "loss is NaN", run="R&D", step=7), Alert("stall", "critical", "no step", run="x")]
    assert PLATFORMS["slack"].text(two).splitlines()[0] == "*2 training alerts on R&amp;D, x*"


@pytest.mark.slow
def test_server_errors_are_retried_until_delivered_and_the_outage_is_logged_once(receiver, log_lines):
    receiver.fail["/feishu"] = 2
    s = sender(receiver, {"name": "f", "type": "feishu", "url": f"{receiver.url}/feishu/hook",
                          "secret_env": "FEISHU_SECRET"})
    s.send([nan_alert()])
    receiver.wait_for("/feishu", 1, timeout=15)
    stats = s.close(2)["f"]
    assert stats == {"type": "feishu", "sent": 1, "failed": 0, "dropped": 0, "retries": 2, "queued": 0, "sending": 0,
                     "down": False, "sender": "ok"}
    logs = "\n".join(log_lines)
    assert logs.count("is down (HTTP 500)") == 1 and logs.count("is back") == 1


def test_alerts_cut_short_by_the_close_deadline_are_all_failed_and_in_the_shutdown_line(receiver, log_lines):
    receiver.fail["/webhook"] = 1000
    receiver.busy["/slack"] = 1000
    s = sender(receiver, {"name": "g", "type": "webhook", "url": f"{receiver.url}/webhook/in"},
               {"name": "s", "type": "slack", "url": f"{receiver.url}/slack/T/B/X"})
    s.send([Alert("nan_inf", "critical", f"loss is nan {i}", step=i) for i in range(3)])
    wait_until(lambda: receiver.arrived >= 2, 5, "both first posts")
    s.send([Alert("loss_spike", "warning", "spike", step=9)])  # queued behind the post being retried
    stats = s.close(0.3)
    assert [(st["sent"], st["failed"], st["queued"], st["sending"]) for st in stats.values()] == [(0, 4, 0, 0)] * 2
    logs = "\n".join(log_lines)
    assert "alert sink g: 4 alerts not delivered before shutdown" in logs
    assert "alert sink g is down (HTTP 500)" in logs and "alert sink s is rate-limiting (HTTP 429)" in logs


@pytest.mark.slow
def test_hung_sink_keeps_what_fits_and_counts_what_is_dropped(receiver):
    receiver.hang["/webhook"] = 3.0
    s = sender(receiver, {"name": "g", "type": "webhook", "url": f"{receiver.url}/webhook/in", "timeout_s": 0.5},
               queue_size=5)
    s.send([Alert("loss_spike", "critical", "spike 0", step=0)])
    wait_until(lambda: receiver.arrived, 5, "the first post to reach the hung endpoint")
    for i in range(1, 12):
        s.send([Alert("loss_spike", "critical", f"spike {i}", step=i)])
    st = s.stats()["g"]
    # the first alert is being posted; five wait in the queue; the other six were dropped
    assert (st["sending"], st["queued"], st["dropped"], st["sent"], st["failed"]) == (1, 5, 6, 0, 0)
    receiver.hang.clear()
    assert s.flush(20), s.stats()
    st = s.close(1)["g"]
    assert st["sent"] == 6 and st["dropped"] == 6 and st["retries"] >= 1


@pytest.mark.slow
@pytest.mark.services
def test_alertmanager_sink_posts_to_the_real_v2_api(tmp_path):
    proc, url = start_alertmanager(str(tmp_path), {"route": {"receiver": "null"}, "receivers": [{"name": "null"}]})
    try:
        s = AlertSender(AlertsConfig.load({"sinks": [{"type": "alertmanager", "url": url}]})[0])
        s.send([nan_alert()])
        assert s.flush(10) and s.stats()["alertmanager"]["sent"] == 1
        alerts = wait_until(lambda: http_json(f"{url}/api/v2/alerts"), 10, "the alert in Alertmanager")
        (a,) = alerts
        assert a["labels"] == {"alertname": "nan_inf", "rule": "nan_inf", "severity": "critical", "run": "llama-7b",
                               "rank": "3", "source": "training-monitor"}
        assert a["annotations"]["step"] == "31" and a["annotations"]["value"] == "nan"
        assert a["annotations"]["trainer_step"] == "46"
        assert a["annotations"]["runbook_url"] == "https://git.example/runbooks/nan_inf.md"
        assert a["status"]["state"] == "active"
        # what monitor relay makes of it (a webhook carries these fields of it): the same facts
        back = Alert.from_alertmanager({k: a[k] for k in ("labels", "annotations", "startsAt")},
                                       "https://grafana.example/d/overview?var-run={run}",
                                       "https://git.example/runbooks")
        sent = nan_alert()
        facts = ("rule", "rank", "step", "onset_step", "trainer_step", "action", "runbook", "dashboard")
        assert [getattr(back, f) for f in facts] == [getattr(sent, f) for f in facts]
        s.close(1)
    finally:
        proc.stop()


@pytest.mark.parametrize("sinks, expected", [
    ([{"type": "telegram", "url": "http://x"}], "type: expected one of"),
    ([{"type": "feishu", "url": "http://x", "secret": "s"}], "secret_env"),
    ([{"type": "feishu", "url": "http://x", "url_env": "U"}], "exactly one of url and url_env"),
    ([{"type": "slack", "url": "http://x", "timeot_s": 3}], "did you mean 'timeout_s'"),
    ([{"type": "slack", "url": "http://x"}, {"type": "slack", "url": "http://y"}], "names must be unique"),
])
def test_bad_sink_settings_name_the_sink_and_key(sinks, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        AlertsConfig.load({"sinks": sinks}, "monitor.yaml", {})
    assert str(err.value).startswith("monitor.yaml: alerts")


def test_a_webhook_url_given_as_url_env_is_refused_and_not_echoed():
    url = "https://hooks.slack.com/services/T0/B0/XXXXSECRET"  # (the URL itself where its variable's name goes)
    with pytest.raises(ConfigError, match=r"url_env: expected the name of an environment variable") as err:
        AlertsConfig.load({"sinks": [{"name": "s", "type": "slack", "url_env": url}]}, "monitor.yaml", {})
    assert "XXXXSECRET" not in str(err.value) and "hooks.slack.com" not in str(err.value)


def test_bad_alerts_settings_in_a_file_name_the_file_line_and_key(tmp_path):
    from training_monitor.config import MonitorConfig

    path = tmp_path / "monitor.yaml"
    path.write_text("run: x\nalerts:\n  sinks:\n    - {name: a, type: feishu, url: http://127.0.0.1:1/x, secret: abc}\n")
    with pytest.raises(ConfigError, match=rf"^{path}:4: alerts.sinks\[0\].secret: put the secret in an environment"):
        MonitorConfig.from_yaml(path)  # at construction, before any training
    path.write_text("monitor:\n  alerts:\n    sinkz: []\n")
    with pytest.raises(ConfigError, match=rf"^{path}:3: monitor.alerts.sinkz: unknown key \(did you mean 'sinks'"):
        MonitorConfig.from_yaml(path)
    relay = tmp_path / "relay.yaml"  # a file of its own (monitor relay --config)
    relay.write_text("alerts:\n  sinks:\n    - {type: slack, url: http://x}\n    - {type: webhok, url: http://y}\n")
    with pytest.raises(ConfigError, match=rf"^{relay}:4: alerts.sinks\[1\].type: 'webhok': did you mean 'webhook'\? "
                                          "expected one of"):
        AlertsConfig.load(str(relay))


def test_missing_environment_variable_disables_only_that_sink():
    cfg, problems = AlertsConfig.load({"sinks": [{"name": "a", "type": "slack", "url_env": "NOPE"},
                                                 {"name": "b", "type": "slack", "url": "http://127.0.0.1:1/x"}]}, "t", {})
    assert [s.name for s in cfg.sinks] == ["b"] and problems == [
        "alert sink a: environment variable NOPE is not set; sink disabled"]


def test_alertmanager_webhook_payload_becomes_alerts():
    payload = json.loads("""{"version": "4", "status": "firing", "alerts": [{"status": "firing",
      "labels": {"alertname": "TrainingStalled", "run": "r1", "rank": "2", "severity": "critical"},
      "annotations": {"summary": "no step for 10 min", "runbook_url": "https://x/runbooks/stall.md"},
      "startsAt": "2026-11-30T14:00:00.123456789Z", "generatorURL": "http://prom/graph"}]}""")
    a = Alert.from_alertmanager(payload["alerts"][0], "http://prom/d/x?run={run}", "https://x/runbooks")
    assert (a.rule, a.run, a.rank, a.severity, a.runbook, a.dashboard) == (
        "TrainingStalled", "r1", 2, "critical", "https://x/runbooks/stall.md", "http://prom/graph")
    assert a.starts_at == pytest.approx(1796047200.123456)
    # links only under the configured bases: none configured, none kept (the relative runbook stays text)
    b = Alert.from_alertmanager(payload["alerts"][0])
    assert (b.runbook, b.dashboard) == ("", "")
    with pytest.raises(ValueError, match="alert.labels: missing"):
        Alert.from_alertmanager({"annotations": {}})


def test_relay_forwards_an_alertmanager_notification_and_rejects_bad_requests(receiver, log_lines):
    import urllib.error

    from training_monitor.relay import Auth, Relay

    token = secret("relay-token-0123456789abcdef")
    cfg, _ = AlertsConfig.load({"runbook_base": "https://x/runbooks",
                                "sinks": [{"name": "team", "type": "wecom", "url": f"{receiver.url}/wecom/send?key=K"},
                                          {"name": "other", "type": "slack", "url": f"{receiver.url}/slack/x"}]})
    relay = Relay(cfg, port=0, auth=Auth(token=token)).start()
    base, bearer = f"http://127.0.0.1:{relay.port}", {"Authorization": f"Bearer {token}"}
    payload = {"version": "4", "status": "firing", "receiver": "relay", "alerts": [
        {"status": "firing", "labels": {"alertname": "TrainingRankStraggler", "run": "r7", "rank": str(r),
                                        "severity": "warning"},
         "annotations": {"summary": f"rank {r} is 40% slower than the median",
                         "runbook_url": "runbooks/rank_straggler.md", "step": "1200", "onset_step": "1150",
                         "action": "alerted", "value": "1.4"},
         "startsAt": "2026-11-30T14:00:00Z"} for r in (3, 5)]}
    try:
        assert http_json(f"{base}/alerts/team", payload, headers=bearer) == {"queued": 2}
        (msg,) = receiver.wait_for("/wecom")
        text = text_of(msg)
        assert "2 training alerts on r7" in text and "rank 3" in text and "rank 5" in text
        assert "step 1200 (onset 1150)" in text and "value 1.4" in text and "-> alerted" in text
        assert "https://x/runbooks/rank_straggler.md" in text and not receiver.delivered("/slack")
        for path, body, headers, code in (("/alerts/team", payload, {}, 401),
                                          ("/alerts/team", payload, {"Authorization": "Bearer wrong"}, 401),
                                          ("/alerts/nope", payload, bearer, 404),
                                          ("/alerts", {"no": "alerts"}, bearer, 400), ("/other", payload, bearer, 404)):
            with pytest.raises(urllib.error.HTTPError) as err:
                http_json(base + path, body, headers=headers)
            assert err.value.code == code, path
        # each refusal logged with its status and the caller's address (a wrong token fails on the relay's side too)
        refused = [line.split("relay: ")[1].strip() for line in log_lines if "relay: answered" in line]
        assert refused == ["answered 401 Unauthorized to a POST from 127.0.0.1"] * 2 + \
            ["answered 404 Not Found to a POST from 127.0.0.1", "answered 400 Bad Request to a POST from 127.0.0.1",
             "answered 404 Not Found to a POST from 127.0.0.1"]
        assert http_json(f"{base}/healthz") == {"status": "ok"}  # no details without credentials
        assert http_json(f"{base}/healthz", headers=bearer)["sinks"]["team"]["sent"] == 2
    finally:
        relay.close(2)


def test_a_digest_of_long_chinese_summaries_fits_every_vendor_s_size_bound(receiver):
    # 12 alerts whose summaries are 1000 Chinese characters (the relay's cap per summary): the message fits each
    # vendor's bound in bytes of UTF-8 (the receivers refuse a larger one, as the vendors do) by listing fewer
    # alerts, whole lines, and counting the rest, the dashboard link kept; the JSON body is sent as UTF-8 (escaped
    # as \uXXXX it would be twice as large). One alert alone has its summary cut, its links kept.
    import dataclasses
    import re

    u = receiver.url
    s = sender(receiver, {"name": "f", "type": "feishu", "url": f"{u}/feishu/hook", "secret_env": "FEISHU_SECRET"},
               {"name": "d", "type": "dingtalk", "url": f"{u}/dingtalk/robot/send?access_token=T0K",
                "secret_env": "DINGTALK_SECRET"},
               {"name": "w", "type": "wecom", "url": f"{u}/wecom/send?key=K3Y"},
               {"name": "s", "type": "slack", "url": f"{u}/slack/T/B/X"})
    base = nan_alert()
    s.send([dataclasses.replace(base, rank=r, summary="损失值为非数" * 200) for r in range(12)])
    for prefix in ("/feishu", "/dingtalk", "/wecom", "/slack"):
        (req,) = receiver.wait_for(prefix)
        text = text_of(req)
        listed = len(re.findall(r"^- \S+ nan_inf on llama-7b rank ", text, re.M))
        more = re.search(r"\.\.\. and (\d+) more: \S+ nan_inf on llama-7b x(\d+)", text)
        assert 0 < listed < 12 and more and int(more[1]) == int(more[2]) == 12 - listed, (prefix, listed, text[-300:])
        assert text.count("损失值为非数" * 200) == listed - (prefix == "/slack"), prefix  # (Slack's one line: cut)
        assert "grafana.example/d/overview" in text, prefix
    assert all(st["sent"] == 12 and st["failed"] == 0 for st in s.close(2).values())
    s = sender(receiver, {"name": "w", "type": "wecom", "url": f"{u}/wecom/send?key=K3Y"})
    s.send([dataclasses.replace(base, summary="损失值为非数" * 400)])
    text = text_of(receiver.wait_for("/wecom", 2)[1])
    assert "…" in text and "git.example/runbooks/nan_inf.md" in text and "grafana.example" in text
    assert s.close(2)["w"]["sent"] == 1


def test_an_alert_only_event_says_the_step_s_rollback_was_another_rule_s(receiver):
    # the demo's step 151: loss_spike asks for the rollback, grad_norm_spike only alerts
    engine = Engine()
    recs = [StepRecord(i + 1, loss=3.0 + 0.01 * (i % 7), grad_norm=1.0 + 0.02 * (i % 5)) for i in range(150)]
    for r in recs:
        engine.observe(r)
    events = engine.observe(StepRecord(151, loss=9.0, grad_norm=40.0))
    assert {e.rule for e in events} == {"loss_spike", "grad_norm_spike"}
    s = sender(receiver, {"name": "g", "type": "webhook", "url": f"{receiver.url}/webhook/in"})
    s.on_action(events, "rolled back to the healthy checkpoint at step 125")
    (req,) = receiver.wait_for("/webhook")
    actions = {a["rule"]: a["action"] for a in req["body"]["alerts"]}
    assert actions == {"loss_spike": "rolled back to the healthy checkpoint at step 125",
                       "grad_norm_spike": "alert only; at this step: rolled back to the healthy checkpoint at step 125"}
    s.close(2)


def test_one_alert_per_excursion_a_new_onset_or_another_action_alerts_again(receiver):
    # a run that does not roll back: its NaN loss is an event at every step (event log, metrics), one alert in chat
    engine = Engine()
    s = sender(receiver, {"name": "g", "type": "webhook", "url": f"{receiver.url}/webhook/in"})
    for step in range(1, 61):
        events = engine.observe(StepRecord(step, loss=math.nan if 31 <= step <= 40 or step >= 50 else 3.0 + 0.01 * (step % 7)))
        if events:
            s.on_action(events, "rollback is off")
    assert s.flush(10)
    sent = [a for r in receiver.delivered("/webhook") for a in r["body"]["alerts"]]
    assert [(a["rule"], a["step"], a["onset_step"]) for a in sent] == [("nan_inf", 31, 31), ("nan_inf", 50, 50)]
    assert s.close(2)["g"]["sent"] == 2


@pytest.mark.slow
def test_a_sink_waiting_between_retries_is_healthy_and_a_post_hanging_at_close_is_counted_failed(receiver, log_lines):
    from services import free_port

    # down (nothing listens): retried with backoff 1, 2, 4 s... past 3 timeouts + 5 s; the thread is not stuck
    s = sender(receiver, {"name": "down", "type": "webhook", "url": f"http://127.0.0.1:{free_port()}/in",
                          "timeout_s": 0.2})
    s.send([Alert("nan_inf", "critical", "loss is nan", step=1)])
    time.sleep(3 * 0.2 + 5 + 1.5)
    st = s.stats()["down"]
    assert st["retries"] >= 3 and st["sender"] == "ok" and s.healthy(), st
    assert s.close(0.2)["down"]["failed"] == 1
    # a post hanging when training ends: it and what waits behind it are counted as failed, and logged
    receiver.hang["/webhook"] = 6.0
    s = sender(receiver, {"name": "slow", "type": "webhook", "url": f"{receiver.url}/webhook/in", "timeout_s": 10})
    s.send([Alert("nan_inf", "critical", "loss is nan", step=1)])
    wait_until(lambda: receiver.arrived, 5, "the post to reach the hung endpoint")
    s.send([Alert("loss_spike", "warning", f"spike {i}", step=i) for i in (2, 3)])
    st = s.close(0.2)["slow"]
    assert (st["sent"], st["failed"], st["queued"], st["sending"]) == (0, 3, 0, 0), st
    assert any("slow: 3 alerts not delivered before shutdown (a post still hanging)" in x for x in log_lines)


def test_a_chat_vendor_s_2xx_without_its_json_reply_is_a_failure_and_a_resolved_alert_ends_in_alertmanager():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class LoginPage(BaseHTTPRequestHandler):  # a proxy answering 200 with a page of its own
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>sign in</html>")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), LoginPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        cfg, _ = AlertsConfig.load({"sinks": [{"name": "f", "type": "feishu", "url": url},
                                              {"name": "g", "type": "webhook", "url": url}]})
        s = AlertSender(cfg)
        s.send([nan_alert()])
        st = s.close(5)
        assert (st["f"]["sent"], st["f"]["failed"], st["g"]["sent"]) == (0, 1, 1)  # (a plain webhook: any 2xx)
    finally:
        server.shutdown()
    from training_monitor.alerts.platforms import PLATFORMS
    resolved = Alert.from_alertmanager({"status": "resolved", "labels": {"alertname": "TrainingStalled"},
                                        "startsAt": "2026-11-30T14:00:00Z", "endsAt": "2026-11-30T14:05:00Z"})
    (item,) = PLATFORMS["alertmanager"].request("http://am:9093", None, [resolved])[1]
    assert item["endsAt"].startswith("2026-11-30T14:05:00")
    (item,) = PLATFORMS["alertmanager"].request("http://am:9093", None, [nan_alert()])[1]
    assert "endsAt" not in item


def test_the_relay_says_once_that_it_left_a_runbook_link_outside_its_base_out(receiver, log_lines):
    from training_monitor.relay import Relay

    cfg, _ = AlertsConfig.load({"runbook_base": "https://git.example/runbooks",
                                "sinks": [{"name": "g", "type": "webhook", "url": f"{receiver.url}/webhook/in"}]})
    relay = Relay(cfg, port=0)
    alert = {"labels": {"alertname": "TrainingStalled"}, "annotations": {
        "summary": "no step for 10 min", "runbook_url": "https://wiki.internal/ml/runbooks/stall.md"}}
    try:
        for n in (1, 2):
            relay.forward({"alerts": [dict(alert, startsAt=f"2026-11-30T14:0{n}:00Z")]}, None)
        sent = [a for r in receiver.wait_for("/webhook") for a in r["body"]["alerts"]]
        assert sent and all(a["runbook"] == "" for a in sent)
        said = [x for x in log_lines if "runbook_url outside alerts.runbook_base" in x]
        assert len(said) == 1 and "https://git.example/runbooks" in said[0]
    finally:
        relay.close(2)
