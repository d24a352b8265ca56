"""Wire formats of the alert destinations: request URL and JSON body, signing, and how to read the reply.

Each platform turns a list of :class:`~monitor.alerts.message.Alert` (one alert, or a digest of several
held back by the rate limit) into one HTTP POST. Formats and limits, as each vendor documents them:

* ``slack``: incoming webhook, ``{"text", "blocks"}``; about 1 message per second.
* ``feishu`` (Lark): custom bot, ``{"msg_type": "text", "content": {"text"}}``; signed bots add
  ``timestamp`` (Unix seconds) and ``sign = base64(HMAC-SHA256(key="{timestamp}\\n{secret}", msg=""))``
  to the body; 5 per second and 100 per minute. Replies ``{"code": 0}`` on success.
* ``dingtalk``: custom robot, ``{"msgtype": "markdown", "markdown": {"title", "text"}}``; signed robots
  add the query ``timestamp`` (Unix ms) and ``sign = urlencode(base64(HMAC-SHA256(key=secret,
  msg="{timestamp}\\n{secret}")))``; 20 per minute. Replies ``{"errcode": 0}``.
* ``wecom``: group robot, ``{"msgtype": "markdown", "markdown": {"content"}}``; the key is in the URL;
  20 per minute. Replies ``{"errcode": 0}``.
* ``webhook``: any endpoint, ``{"alerts": [Alert fields...]}``; success is any 2xx.
* ``alertmanager``: Alertmanager's v2 API, ``POST {url}/api/v2/alerts`` with a list of
  ``{"labels", "annotations", "startsAt"}``; labels are ``alertname`` (the rule), ``rule``,
  ``severity``, ``run``, ``rank`` and ``source``; steps and values go in annotations (never labels).
"""
from __future__ import annotations

import abc
import base64
import hashlib
import hmac
import time
import urllib.parse
from datetime import datetime, timezone

from .message import Alert

MAX_LINES = 20  # alerts listed in one digest message; the rest are counted


class Platform(abc.ABC):
    """Base: ``request`` builds the POST, ``verdict`` reads the reply. ``limits`` are (messages, seconds)
    windows the vendor enforces; ``style`` is how bold text and links are written."""

    limits: tuple[tuple[int, float], ...] = ()
    bold, link = "{}", "{url}"
    busy_codes: frozenset = frozenset()  # vendor error codes meaning "too many requests, try later"

    @abc.abstractmethod
    def request(self, url: str, secret: str | None, alerts: list[Alert]) -> tuple[str, object]:
        """``(url, json_body)`` of the POST that delivers ``alerts`` (one message)."""

    def verdict(self, status: int, body: dict | None) -> tuple[str, str]:
        """``("ok"|"retry"|"fail", reason)`` for a 2xx reply whose JSON body is ``body``."""
        code = None if body is None else body.get("errcode", body.get("code", body.get("StatusCode")))
        if code in (None, 0):
            return "ok", ""
        reason = f"code {code}: {body.get('errmsg') or body.get('msg') or body.get('StatusMessage') or ''}"
        return ("retry" if code in self.busy_codes else "fail"), reason

    def text(self, alerts: list[Alert]) -> str:
        """The message body: one alert's facts, or a digest with one line per alert."""
        if len(alerts) == 1:
            a = alerts[0]
            lines = [self.bold.format(a.title()), a.summary]
            for name, value in a.facts():
                shown = self.link.format(url=value, text=name) if name in ("runbook", "dashboard") else value
                lines.append(f"{name}: {shown}")
            return "\n".join(lines)
        lines = [self.bold.format(self.title(alerts))]
        for a in alerts[:MAX_LINES]:
            where = " ".join(f"{k} {v}" for k, v in a.facts() if k in ("rank", "step", "value"))
            action = f" -> {a.action}" if a.action else ""
            runbook = f" ({self.link.format(url=a.runbook, text='runbook')})" if a.runbook else ""
            lines.append(f"- {a.title()} {where}: {a.summary}{action}{runbook}")
        dashboards = sorted({a.dashboard for a in alerts[:MAX_LINES] if a.dashboard})
        lines += [f"dashboard: {self.link.format(url=d, text=d)}" for d in dashboards]
        if len(alerts) > MAX_LINES:
            lines.append(f"... and {len(alerts) - MAX_LINES} more")
        return "\n".join(lines)

    @staticmethod
    def title(alerts: list[Alert]) -> str:
        if len(alerts) == 1:
            return alerts[0].title()
        runs = sorted({a.run for a in alerts if a.run})
        return f"{len(alerts)} training alerts" + (f" on {', '.join(runs)}" if runs else "")


class Slack(Platform):
    limits = ((1, 1.0),)
    bold, link = "*{}*", "<{url}|{text}>"

    def request(self, url, secret, alerts):
        text = self.text(alerts)
        return url, {"text": self.title(alerts), "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                                                        "text": text[:3000]}}]}


class Feishu(Platform):
    limits = ((5, 1.0), (100, 60.0))
    busy_codes = frozenset({9499, 11232})

    def request(self, url, secret, alerts):
        body = {"msg_type": "text", "content": {"text": self.text(alerts)}}
        if secret:
            ts = str(int(time.time()))
            key = f"{ts}\n{secret}".encode()
            body["timestamp"] = ts
            body["sign"] = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
        return url, body


class DingTalk(Platform):
    limits = ((20, 60.0),)
    bold, link = "**{}**", "[{text}]({url})"
    busy_codes = frozenset({130101})

    def request(self, url, secret, alerts):
        body = {"msgtype": "markdown", "markdown": {"title": self.title(alerts),
                                                    "text": self.text(alerts).replace("\n", "  \n")}}
        if secret:
            ts = str(int(time.time() * 1000))
            digest = hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()
            sign = urllib.parse.quote_plus(base64.b64encode(digest).decode())
            url = f"{url}{'&' if '?' in url else '?'}timestamp={ts}&sign={sign}"
        return url, body


class WeCom(Platform):
    limits = ((20, 60.0),)
    bold, link = "**{}**", "[{text}]({url})"
    busy_codes = frozenset({45009})

    def request(self, url, secret, alerts):
        return url, {"msgtype": "markdown", "markdown": {"content": self.text(alerts)[:4096]}}


class Webhook(Platform):
    def request(self, url, secret, alerts):
        return url, {"alerts": [a.to_dict() for a in alerts]}

    def verdict(self, status, body):
        return "ok", ""


class Alertmanager(Platform):
    def request(self, url, secret, alerts):
        out = []
        for a in alerts:
            labels = {"alertname": a.rule, "rule": a.rule, "severity": a.severity, "source": "training-monitor"}
            if a.run:
                labels["run"] = a.run
            if a.rank is not None:
                labels["rank"] = str(a.rank)
            notes = {"summary": a.summary}
            notes.update({k: v for k, v in (("step", a.step), ("onset_step", a.onset_step), ("value", a.value),
                                            ("action", a.action), ("runbook_url", a.runbook),
                                            ("dashboard_url", a.dashboard)) if v not in (None, "")})
            item = {"labels": labels, "annotations": {k: str(v) for k, v in notes.items()}}
            if a.starts_at:
                item["startsAt"] = datetime.fromtimestamp(a.starts_at, timezone.utc).isoformat()
            out.append(item)
        return f"{url.rstrip('/')}/api/v2/alerts", out

    def verdict(self, status, body):
        return "ok", ""


PLATFORMS: dict[str, Platform] = {"slack": Slack(), "feishu": Feishu(), "dingtalk": DingTalk(),
                                  "wecom": WeCom(), "webhook": Webhook(), "alertmanager": Alertmanager()}
