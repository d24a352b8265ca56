"""Grafana itself: checking dashboard JSON against the Grafana 11.6 dashboard model, and uploading the
dashboards of :mod:`training_monitor.dashboards` with grafana-client (``monitor dashboards push``)."""
from __future__ import annotations

import enum
import json
import types
import typing
from urllib.parse import urlsplit, urlunsplit

from grafana_foundation_sdk.cog.encoder import JSONEncoder

from .dashboards import DASHBOARDS

def model_problems(dashboard: dict) -> list[str]:
    """What in ``dashboard`` (Grafana JSON) the Grafana 11.6 dashboard model does not accept; [] when none.

    The JSON is decoded with the grafana-foundation-sdk model classes (generated from Grafana's own
    dashboard and panel schemas of that release), with every panel and datasource plugin of the SDK
    registered, so panel options, field config and Prometheus queries decode into their typed classes too.
    Reported: a panel type or query datasource the model does not know (it would stay an untyped bag), a
    value whose type does not match the model's annotation (a string for a number, a value outside an
    enum), and any key or value that does not survive the decode and re-encode (a key the model does not
    have). The only difference the round trip may make is an empty object it adds for a missing one.
    """
    from grafana_foundation_sdk.cog import runtime
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models import dashboard as model

    register_default_plugins()
    problems = []
    for i, p in enumerate(dashboard.get("panels", [])):
        if p.get("type") != "row" and runtime.panelcfg_config(p.get("type", "")) is None:
            problems.append(f"panels/{i}: panel type {p.get('type')!r} is not in the model")
    decoded = model.Dashboard.from_json(json.loads(json.dumps(dashboard)))
    for i, p in enumerate(decoded.panels or []):
        for j, t in enumerate(getattr(p, "targets", None) or []):
            if isinstance(t, runtime.UnknownDataquery):
                problems.append(f"panels/{i}/targets/{j}: query of an unknown datasource type")
    problems += _check(decoded, model.Dashboard, "")
    again = json.loads(JSONEncoder(sort_keys=True).encode(decoded))
    problems += _diff(_prune(dashboard), _prune(again), "")
    return problems


def _prune(value):
    """``value`` without empty objects (the decoder adds empty ``custom`` objects)."""
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v != {}}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _diff(original, again, path: str) -> list[str]:
    if isinstance(original, dict) and isinstance(again, dict):
        out = [f"{path}/{k}: not in the model (lost when decoded)" for k in original if k not in again]
        out += [f"{path}/{k}: added by the model ({again[k]!r})" for k in again if k not in original]
        return out + [p for k in original if k in again for p in _diff(original[k], again[k], f"{path}/{k}")]
    if isinstance(original, list) and isinstance(again, list) and len(original) == len(again):
        return [p for i, (a, b) in enumerate(zip(original, again)) for p in _diff(a, b, f"{path}/{i}")]
    return [] if original == again else [f"{path}: {original!r} became {again!r}"]


def _is_model(cls) -> bool:
    return isinstance(cls, type) and cls.__module__.startswith("grafana_foundation_sdk.models.")


def _check(value, hint, path: str) -> list[str]:
    """Where ``value`` does not match the model annotation ``hint`` (recursively); [] when it does.

    The SDK's decoder leaves a few typed lists as plain JSON (panel ``transformations`` and ``links``):
    such a value is decoded here with the annotated class and must survive that round trip too.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    wrong = [f"{path}: {value!r} is not {getattr(hint, '__name__', hint)}"]
    if hint in (typing.Any, object):  # panel options and custom field config: typed by the panel plugin
        return _check(value, type(value), path) if _is_model(type(value)) else []
    if hint is type(None):
        return [] if value is None else wrong
    if origin in (typing.Union, types.UnionType):
        results = [_check(value, a, path) for a in args]
        if any(r == [] for r in results):
            return []
        same = [r for a, r in zip(args, results) if isinstance(a, type) and _is_model(a) and isinstance(value, a)]
        real = same or [r for a, r in zip(args, results) if a is not type(None)]
        return real[0] if len(real) == 1 else wrong
    if origin is typing.Literal:
        return [] if value in args else wrong
    if origin is list:
        if not isinstance(value, list):
            return wrong
        return [p for i, v in enumerate(value) for p in _check(v, args[0], f"{path}/{i}")]
    if origin is dict:
        if not isinstance(value, dict):
            return wrong
        return [p for k, v in value.items() for p in _check(k, args[0], path) + _check(v, args[1], f"{path}/{k}")]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [] if isinstance(value, hint) or value in {m.value for m in hint} else wrong
    if hint is bool:
        return [] if isinstance(value, bool) else wrong
    if hint is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else wrong
    if hint is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else wrong
    if _is_model(hint) and isinstance(value, dict):  # left undecoded by the SDK: decode it here
        decoded = hint.from_json(json.loads(json.dumps(value)))
        again = json.loads(JSONEncoder(sort_keys=True).encode(decoded))
        return _check(decoded, hint, path) + _diff(_prune(value), _prune(again), path)
    if not isinstance(hint, type):
        raise TypeError(f"model annotation not understood: {hint!r}")
    if not isinstance(value, hint):
        return wrong
    if not _is_model(type(value)):
        return []
    return [p for name, h in typing.get_type_hints(type(value)).items()
            for p in _check(getattr(value, name, None), h, f"{path}/{name}")]


# ---------------------------------------------------------------------------------------------- push
class PushError(Exception):
    """A push that did not go through; the message is one line and never holds the token."""


def _safe_url(url: str) -> str:
    """``url`` without user:password and query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        host += f":{parts.port}" if parts.port else ""
    except ValueError:
        pass
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _reason(exc: BaseException) -> str:
    """A short reason for a connection failure: the text of the innermost error of the chain."""
    seen, e, last = set(), exc, exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        last = e
        e = e.__cause__ or e.__context__ or getattr(e, "reason", None)
        e = e if isinstance(e, BaseException) else None
    text = getattr(last, "strerror", None) or str(last) or type(last).__name__
    return text.splitlines()[0][:200]


def _said(text) -> str:
    """What a server said, on one line and at most 160 characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= 160 else text[:159] + "…"


def push(url: str, token: str, folder: str | None = None, overwrite: bool = False,
         runbook_base: str | None = None, timeout: float = 10.0) -> list[dict]:
    """Upload every dashboard to the Grafana at ``url`` with grafana-client; return Grafana's answers.

    ``folder``: title (or uid) of the folder to put them in, created when missing (None: the General
    folder). ``overwrite``: replace a dashboard of the same uid. Raises PushError with a one-line
    message (unreachable server, refused token, existing dashboard without ``overwrite``, ...).
    """
    try:
        from grafana_client import GrafanaApi
        from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaTimeoutError
        from niquests.exceptions import JSONDecodeError, RequestException
    except ImportError:
        raise PushError("pushing dashboards needs grafana-client: pip install 'training-monitor[grafana]'") from None

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise PushError(f"Grafana URL must look like http://HOST:PORT, got {_safe_url(url)!r}")
    shown = _safe_url(url)
    origin = _safe_url(urlunsplit((parts.scheme, parts.netloc, "", "", "")))  # Grafana's answers hold the sub-path
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    prefix = parts.path.strip("/") + "/" if parts.path.strip("/") else ""  # grafana-client appends "api"
    api = GrafanaApi(auth=token, host=host, port=port, url_path_prefix=prefix, protocol=parts.scheme,
                     timeout=timeout)
    not_grafana = f"the server at {shown} does not answer like Grafana's HTTP API"

    def call(what: str, fn, *args, kind=dict):
        try:
            answer = fn(*args)
        except JSONDecodeError:
            raise PushError(f"{not_grafana} (no JSON in the answer to {what}); check the URL") from None
        except (RequestException, GrafanaTimeoutError) as exc:
            raise PushError(f"cannot reach Grafana at {shown} ({_reason(exc)})") from None
        except GrafanaClientError as exc:
            message = _said(exc.response.get("message", "") if isinstance(exc.response, dict) else exc.response)
            if exc.status_code == 401:
                raise PushError(f"Grafana at {shown} refused the token (401 Unauthorized: {message}); "
                                "check GRAFANA_TOKEN") from None
            if exc.status_code == 403:
                raise PushError(f"the token may not {what} on Grafana at {shown} (403: {message}); "
                                "it needs the Editor role or above") from None
            if exc.status_code == 412:
                raise PushError(f"cannot {what}: it already exists on Grafana at {shown} ({message}); "
                                "pass --overwrite to replace it") from None
            raise PushError(f"Grafana at {shown} answered {exc.status_code} to {what}: {message}") from None
        except GrafanaException as exc:
            if exc.status_code == 0:
                raise PushError(f"cannot reach Grafana at {shown} ({_reason(exc)})") from None
            raise PushError(f"Grafana at {shown} answered {exc.status_code} to {what}: {_said(exc.message)}") from None
        if not isinstance(answer, kind):
            raise PushError(f"{not_grafana} (to {what}: {str(answer)[:80]!r}); check the URL")
        return answer

    def clean(e: PushError) -> PushError:
        message = " ".join(str(e).split())  # one line, whatever the server said
        return PushError(message.replace(token, "***") if token else message)

    try:
        folder_uid = None
        if folder:
            found = [f for f in call("list folders", api.folder.get_all_folders, kind=list)
                     if isinstance(f, dict) and folder in (f.get("title"), f.get("uid"))]
            created = found[0] if found else call(f"create folder {folder!r}", api.folder.create_folder, folder)
            folder_uid = created["uid"]
        answers = []
        for name, make in DASHBOARDS.items():
            dash = make(runbook_base=runbook_base)
            body = {"dashboard": dash, "overwrite": overwrite, "message": "monitor dashboards push"}
            if folder_uid is not None:
                body["folderUid"] = folder_uid
            answer = call(f"save dashboard {dash['title']!r} (uid {dash['uid']})", api.dashboard.update_dashboard,
                          body)
            answers.append({"title": dash["title"], "uid": answer.get("uid", dash["uid"]),
                            "url": origin + answer.get("url", ""), "version": answer.get("version"),
                            "folder_uid": folder_uid})
        return answers
    except PushError as exc:
        raise clean(exc) from None
