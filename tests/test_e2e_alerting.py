"""End to end with the real servers: a real MindSpore run's exporter is scraped by Prometheus (Debian
package), a poisoned batch makes the engine count a ``nan_inf`` anomaly, Prometheus fires
``TrainingAnomaly`` from deploy/prometheus/alerts.yml, Alertmanager (Debian package) routes it by
deploy/alertmanager/alertmanager.yml to ``monitor relay`` (the real CLI, a subprocess), which posts signed
messages to Feishu and DingTalk endpoints on 127.0.0.1 that check the signatures by the documented
algorithms. The monitor's own DingTalk sink posts the same event directly."""
import os
import sys
from pathlib import Path

import pytest
import yaml

from services import (
    Process,
    Receiver,
    free_port,
    http_json,
    secret,
    start_alertmanager,
    start_prometheus,
    text_of,
    wait_until,
)
from train_helpers import AtStep, train
from training_monitor.callbacks import TrainingMonitor

pytestmark = [pytest.mark.slow, pytest.mark.mindspore, pytest.mark.services]

ROOT = Path(__file__).resolve().parent.parent
SECRETS = {"feishu": "e2e-feishu-secret", "dingtalk": "e2e-dingtalk-secret"}
RELAY_TOKEN = secret("e2e-relay-token-0123456789")


def relay_to(webhook_url: str, relay_port: int) -> str:
    """The shipped Alertmanager config's relay URL, pointed at the port this test's relay listens on."""
    assert "127.0.0.1:9095" in webhook_url, webhook_url
    return webhook_url.replace("127.0.0.1:9095", f"127.0.0.1:{relay_port}")


def alertmanager_config(relay_port: int, token_file: str) -> dict:
    """The shipped config, pointed at this test's relay port and token file (its credentials as shipped)."""
    cfg = yaml.safe_load((ROOT / "deploy/alertmanager/alertmanager.yml").read_text())
    hooks = [h for r in cfg["receivers"] for h in r.get("webhook_configs", [])]
    assert hooks, "the shipped Alertmanager config has no webhook receiver"
    for h in hooks:
        h["url"] = relay_to(h["url"], relay_port)
        assert h["http_config"]["authorization"]["credentials_file"], h  # the relay's bearer token
        h["http_config"]["authorization"]["credentials_file"] = token_file
    cfg["route"].update(group_wait="1s", group_interval="1s")  # test speed; the routing tree is as shipped
    return cfg


def prometheus_config(sd_dir: str, am_url: str, relay_port: int) -> dict:
    cfg = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    cfg["global"].update(scrape_interval="1s", scrape_timeout="1s")
    cfg["rule_files"] = [str(ROOT / "deploy/prometheus" / f) for f in cfg["rule_files"]]
    cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [am_url.split("//")[1]]
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "training"]
    job["file_sd_configs"][0]["files"] = [f"{sd_dir}/*.json"]
    job["file_sd_configs"][0]["refresh_interval"] = "1s"
    (relay,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "monitor-relay"]
    relay["static_configs"][0]["targets"] = [f"127.0.0.1:{relay_port}"]
    return cfg


def test_poisoned_batch_reaches_chat_through_prometheus_alertmanager_and_the_relay(tmp_path, monkeypatch):
    receiver = Receiver(SECRETS)
    relay_port = free_port()
    (tmp_path / "relay.yaml").write_text(yaml.safe_dump({"alerts": {"sinks": [
        {"name": "feishu", "type": "feishu", "url": f"{receiver.url}/feishu/relay", "secret_env": "FS_SECRET"},
        {"name": "dingtalk", "type": "dingtalk", "url": f"{receiver.url}/dingtalk/relay?access_token=t",
         "secret_env": "DT_SECRET"}]}}))
    env = {**os.environ, "FS_SECRET": SECRETS["feishu"], "DT_SECRET": SECRETS["dingtalk"],
           "MONITOR_RELAY_TOKEN": RELAY_TOKEN}
    (tmp_path / "relay_token").write_text(RELAY_TOKEN + "\n")
    relay = Process([sys.executable, "-m", "training_monitor.cli", "relay", "--config", str(tmp_path / "relay.yaml"),
                     "--port", str(relay_port)], str(tmp_path / "relay.log"), env=env)
    am = prom = None
    try:
        wait_until(lambda: http_json(f"http://127.0.0.1:{relay_port}/healthz"), 20, "monitor relay to start")
        am, am_url = start_alertmanager(str(tmp_path), alertmanager_config(relay_port, str(tmp_path / "relay_token")))
        sd_dir = str(tmp_path / "file_sd")
        os.makedirs(sd_dir)
        prom, prom_url = start_prometheus(str(tmp_path), prometheus_config(sd_dir, am_url, relay_port))

        def scraped():
            q = http_json(f"{prom_url}/api/v1/query?query=train_anomalies_total%7Brun%3D%22e2e%22%7D")
            return q["data"]["result"]

        monkeypatch.setenv("DT_SECRET", SECRETS["dingtalk"])  # the monitor's own sink reads it from the environment
        mon = TrainingMonitor(run="e2e", output_dir=str(tmp_path / "out"), metrics_port=0, file_sd_dir=sd_dir,
                              checkpoint_every=5, healthy_after=5,
                              alerts={"sinks": [{"name": "direct", "type": "dingtalk", "secret_env": "DT_SECRET",
                                                 "url": f"{receiver.url}/dingtalk/direct?access_token=t"}]})
        wait_scrape = AtStep(lambda cb: cb.cur_step_num == 15 and wait_until(scraped, 30, "the first scrape"))
        train([mon, wait_scrape], steps=40, poison={24})
        def nan_alerts():  # (on a loaded machine a throughput_drop alert may come too)
            return [r for r in receiver.delivered("/dingtalk/direct") if "nan_inf on e2e" in text_of(r)]
        wait_until(nan_alerts, 10, "the nan_inf alert of the monitor's own DingTalk sink")
        assert len(nan_alerts()) == 1, [text_of(r) for r in receiver.delivered("/dingtalk/direct")]
        direct = nan_alerts()[0]
        relayed_fs = receiver.wait_for("/feishu/relay", 1, timeout=60)
        relayed_dt = receiver.wait_for("/dingtalk/relay", 1, timeout=10)
        mon.close()

        def relay_counted():  # the relay's own counters, scraped from its /metrics (job monitor-relay)
            q = http_json(f"{prom_url}/api/v1/query?query=monitor_relay_alerts_total%7Boutcome%3D%22sent%22%7D")
            return {r["metric"]["sink"]: float(r["value"][1]) for r in q["data"]["result"]}
        wait_until(lambda: relay_counted().get("feishu", 0) >= 1, 20, "the relay's sent alerts scraped")
    except AssertionError as exc:
        logs = "\n".join(f"--- {p.log_path}\n{p.output()}" for p in (relay, am, prom) if p)
        raise AssertionError(f"{exc}\n{logs}") from None
    finally:
        for p in (prom, am, relay):
            if p:
                p.stop()
        receiver.close()

    (event,) = [e for e in mon.kept.events if e.rule == "nan_inf"]
    text = text_of(direct)
    assert f"step: {event.step}" in text and "nan_inf on e2e" in text and "to healthy checkpoint at step" in text
    assert "runbooks/nan_inf.md" in text
    for req in relayed_fs[:1] + relayed_dt[:1]:  # the same event, through Prometheus and Alertmanager
        text = text_of(req)
        assert "nan_inf on e2e" in text and "rank: 0" in text and "runbooks/nan_inf.md" in text, text
        # the event's step and value from the rank's gauges, read even when the run has ended by then
        assert f"step: {event.step}" in text and "value: nan" in text, text
    # the relay forwards only authenticated requests, so Alertmanager sent the token; the relay never logs it
    assert RELAY_TOKEN not in relay.output()
    # every message that reached the receiver was accepted, i.e. correctly signed
    assert all(r["accepted"] for r in receiver.requests), [r for r in receiver.requests if not r["accepted"]]
