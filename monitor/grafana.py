"""Uploading the dashboards of :mod:`training_monitor.dashboards` to Grafana with grafana-client
(``monitor dashboards push``)."""
from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from .dashboards import DASHBOARDS


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
    seen: set[int] = set()
    e: BaseException | None = exc
    last = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        last = e
        cause = e.__cause__ or e.__context__ or getattr(e, "reason", None)
        e = cause if isinstance(cause, BaseException) else None
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
        for make in DASHBOARDS.values():
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
