"""Wire formats of the alert destinations: request URL and JSON body, signing, and how to read the reply.

Each platform turns a list of :class:`~training_monitor.alerts.message.Alert` (one alert, or a digest of several
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
  ``{"labels", "annotations", "startsAt"}`` (and ``endsAt`` for a resolved alert); labels are ``alertname`` (the
  rule), ``rule``, ``severity``, ``run``, ``rank`` and ``source``; steps and values go in annotations (never labels).

Every text that comes from an alert is escaped for the platform's markup (:meth:`Platform.escape`), so a
label or annotation can neither mention anyone (Slack ``<!channel>``, Feishu ``<at user_id="all">``,
WeCom ``<@all>``) nor make a link (``<https://x|text>``, ``[text](url)``); bare URLs in it are defanged
(``https[:]//host``) so clients do not link them. The only links are an alert's ``runbook`` and
``dashboard`` when they are http(s) URLs (the relay keeps only those under the configured bases), and the
only mentions are a sink's configured ``mentions``.
"""
from __future__ import annotations

import abc
import base64
import hashlib
import hmac
import re
import time
import urllib.parse
from collections import Counter
from datetime import UTC, datetime

from .message import Alert

MAX_LINES = 20  # alerts listed in one digest message (critical first); the rest are counted by alert name
_SEVERITY_ORDER = {"critical": 0, "warning": 1}  # (info and others after)
# control characters, line separators and bidirectional formatting (embeddings, overrides, isolates, marks: text
# shown in another order than sent)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+")
_LINKABLE = re.compile(r"^https?://[^\s<>|\[\]()\"'`]+$")  # a URL that no markup below can break out of
_FULLWIDTH = str.maketrans({"<": "\uff1c", ">": "\uff1e", "[": "\uff3b", "]": "\uff3d"})


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8, cut between characters and ended with "…" when longer."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[:max(limit - 3, 0)].decode(errors="ignore") + "…"


def plain(text) -> str:
    """``text`` on one line (control and bidirectional formatting characters as a space), bare URLs defanged
    (``://`` -> ``[:]//``)."""
    return _CONTROL.sub(" ", str(text)).replace("://", "[:]//")


class Platform(abc.ABC):
    """Base: ``request`` builds the POST, ``verdict`` reads the reply. ``limits`` are (messages, seconds)
    windows the vendor enforces; ``style`` is how bold text and links are written."""

    limits: tuple[tuple[int, float], ...] = ()
    max_bytes: int | None = None  # the vendor's bound on a message's text, in bytes of UTF-8 (None: none)
    bold, link = "{}", "{url}"
    busy_codes: frozenset = frozenset()  # vendor error codes meaning "too many requests, try later"
    mention, mention_all = "@{}", "@all"  # how a configured mention is written in the text

    @abc.abstractmethod
    def request(self, url: str, secret: str | None, alerts: list[Alert], mentions=()) -> tuple[str, object]:
        """``(url, json_body)`` of the POST that delivers ``alerts`` (one message), mentioning the user ids in
        ``mentions`` (``all``: everyone) where the platform can."""

    def escape(self, text) -> str:
        """``text`` as inert text of this platform's markup (the base: :func:`plain`, ``< > [ ]`` as their
        full-width forms, which no platform reads as markup)."""
        return plain(text).translate(_FULLWIDTH)

    def _link(self, url: str, name: str) -> str:
        return self.link.format(url=url, text=name) if _LINKABLE.match(url) else self.escape(url)

    def mentions(self, ids) -> str:
        """The configured mentions, as the text writes them ("" for none)."""
        return " ".join(self.mention_all if i == "all" else self.mention.format(i) for i in ids)

    json_reply = False  # the vendor answers success with a JSON object: a 2xx without one (a proxy's page) failed

    def verdict(self, status: int, body: dict | None) -> tuple[str, str]:
        """``("ok"|"retry"|"fail", reason)`` for a 2xx reply whose JSON body is ``body`` (None: not a JSON
        object)."""
        if body is None:
            return ("fail", f"HTTP {status} without the vendor's JSON reply") if self.json_reply else ("ok", "")
        code = body.get("errcode", body.get("code", body.get("StatusCode")))
        if code in (None, 0):
            return "ok", ""
        reason = f"code {code}: {body.get('errmsg') or body.get('msg') or body.get('StatusMessage') or ''}"
        return ("retry" if code in self.busy_codes else "fail"), reason

    def text(self, alerts: list[Alert], mentions=()) -> str:
        """The message body: one alert's facts, or a digest with one line per alert; every alert text
        escaped, then the configured mentions. Within the vendor's bound (:attr:`max_bytes`) the links and a
        digest's count of what it does not list are kept: one alert's summary is cut, a digest lists fewer
        alerts (whole lines) and counts the rest."""
        e = self.escape
        tail = "\n" + self.mentions(mentions) if mentions else ""
        room = None if self.max_bytes is None else self.max_bytes - len(tail.encode())
        if len(alerts) == 1:
            a = alerts[0]
            facts = [f"{n}: {self._link(v, n) if n in ('runbook', 'dashboard') else e(v)}" for n, v in a.facts()]
            head, summary = self.bold.format(e(a.title())), e(a.summary)
            if room is not None:
                summary = cut(summary, room - len("\n".join([head, "", *facts]).encode()))
            text = "\n".join([head, summary, *facts])
        else:
            ordered = sorted(alerts, key=lambda a: _SEVERITY_ORDER.get(a.severity, 2))
            dashboards = [f"dashboard: {self._link(d, d)}"
                          for d in sorted({a.dashboard for a in ordered[:MAX_LINES] if a.dashboard})]
            shown = min(len(ordered), MAX_LINES)
            while True:
                lines = [self._line(a, e(a.summary)) for a in ordered[:shown]]
                rest = Counter(a.title() for a in ordered[shown:])
                more = [f"... and {len(ordered) - shown} more: "
                        + ", ".join(f"{e(title)} x{n}" for title, n in rest.most_common())] if rest else []
                frame = [self.bold.format(self.title(alerts)), *dashboards, *more]
                text = "\n".join(frame[:1] + lines + frame[1:])
                over = 0 if room is None else len(text.encode()) - room
                if over <= 0:
                    break
                if shown == 1:  # one line left: its summary is cut
                    summary = e(ordered[0].summary)
                    line = self._line(ordered[0], cut(summary, len(summary.encode()) - over))
                    text = "\n".join(frame[:1] + [line] + frame[1:])
                    break
                shown -= 1
        if room is not None:
            text = cut(text, room)
        return text + tail

    def _line(self, a: Alert, summary: str) -> str:
        """``a``'s line in a digest, with ``summary`` (escaped) as its summary."""
        where = " ".join(f"{k} {v}" for k, v in a.facts() if k in ("rank", "step", "value"))
        action = f" -> {self.escape(a.action)}" if a.action else ""
        runbook = f" ({self._link(a.runbook, 'runbook')})" if a.runbook else ""
        return f"- {self.escape(a.title())} {self.escape(where)}: {summary}{action}{runbook}"

    def title(self, alerts: list[Alert]) -> str:
        """The message title, escaped."""
        if len(alerts) == 1:
            return self.escape(alerts[0].title())
        runs = sorted({a.run for a in alerts if a.run})
        return self.escape(f"{len(alerts)} training alerts" + (f" on {', '.join(runs)}" if runs else ""))


class Slack(Platform):
    limits = ((1, 1.0),)
    max_bytes = 3000  # a section block's text of at most 3000 characters
    bold, link = "*{}*", "<{url}|{text}>"
    mention, mention_all = "<@{}>", "<!channel>"

    def escape(self, text):
        """Slack's documented mrkdwn escapes: ``&`` ``<`` ``>`` as entities."""
        return plain(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def request(self, url, secret, alerts, mentions=()):
        text = self.text(alerts, mentions)
        return url, {"text": self.title(alerts), "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                                                        "text": text}}]}


class Feishu(Platform):
    limits = ((5, 1.0), (100, 60.0))
    max_bytes = 18000  # a request body of at most 20 KB
    json_reply = True
    busy_codes = frozenset({9499, 11232})
    mention, mention_all = '<at user_id="{}"></at>', '<at user_id="all"></at>'

    def request(self, url, secret, alerts, mentions=()):
        body = {"msg_type": "text", "content": {"text": self.text(alerts, mentions)}}
        if secret:
            ts = str(int(time.time()))
            key = f"{ts}\n{secret}".encode()
            body["timestamp"] = ts
            body["sign"] = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
        return url, body


class DingTalk(Platform):
    limits = ((20, 60.0),)
    max_bytes = 18000  # a message of at most 20000 bytes (its line breaks doubled for markdown)
    json_reply = True
    bold, link = "**{}**", "[{text}]({url})"
    busy_codes = frozenset({130101})

    def request(self, url, secret, alerts, mentions=()):
        body = {"msgtype": "markdown", "markdown": {"title": self.title(alerts),
                                                    "text": self.text(alerts, mentions).replace("\n", "  \n")}}
        if mentions:  # DingTalk notifies only the users named in "at" (and written as @id in the text)
            body["at"] = {"isAtAll": "all" in mentions, "atUserIds": [m for m in mentions if m != "all"]}
        if secret:
            ts = str(int(time.time() * 1000))
            digest = hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()
            sign = urllib.parse.quote_plus(base64.b64encode(digest).decode())
            url = f"{url}{'&' if '?' in url else '?'}timestamp={ts}&sign={sign}"
        return url, body


class WeCom(Platform):
    limits = ((20, 60.0),)
    max_bytes = 4096  # markdown content of at most 4096 bytes
    json_reply = True
    bold, link = "**{}**", "[{text}]({url})"
    busy_codes = frozenset({45009})
    mention, mention_all = "<@{}>", "<@all>"

    def request(self, url, secret, alerts, mentions=()):
        return url, {"msgtype": "markdown", "markdown": {"content": self.text(alerts, mentions)}}


class Webhook(Platform):
    def request(self, url, secret, alerts, mentions=()):
        return url, {"alerts": [a.to_dict() for a in alerts]}

    def verdict(self, status, body):
        return "ok", ""


class Alertmanager(Platform):
    def request(self, url, secret, alerts, mentions=()):
        out = []
        for a in alerts:
            labels = {"alertname": a.rule, "rule": a.rule, "severity": a.severity, "source": "training-monitor"}
            if a.run:
                labels["run"] = a.run
            if a.rank is not None:
                labels["rank"] = str(a.rank)
            notes = {"summary": a.summary}
            notes.update({k: v for k, v in (("step", a.step), ("onset_step", a.onset_step),
                                            ("trainer_step", a.trainer_step), ("value", a.value),
                                            ("action", a.action), ("runbook_url", a.runbook),
                                            ("dashboard_url", a.dashboard)) if v not in (None, "")})
            item: dict[str, object] = {"labels": labels, "annotations": {k: str(v) for k, v in notes.items()}}
            if a.starts_at:
                item["startsAt"] = datetime.fromtimestamp(a.starts_at, UTC).isoformat()
            if a.status == "resolved":  # (an Alertmanager notification relayed): ended, not firing again
                item["endsAt"] = datetime.fromtimestamp(a.ends_at or time.time(), UTC).isoformat()
            out.append(item)
        return f"{url.rstrip('/')}/api/v2/alerts", out

    def verdict(self, status, body):
        return "ok", ""


# (lark: Feishu's international edition, open.larksuite.com, the same custom-bot API)
PLATFORMS: dict[str, Platform] = {"slack": Slack(), "feishu": Feishu(), "lark": Feishu(), "dingtalk": DingTalk(),
                                  "wecom": WeCom(), "webhook": Webhook(), "alertmanager": Alertmanager()}
