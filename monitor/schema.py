"""One validator for settings dataclasses, driven by their fields' types and ``metadata``.

A field's type (``bool``, ``int``, ``float``, ``str``, ``dict``, ``list``, ``tuple`` or a union of them,
``None`` allowed when the union holds it) says what a value may be (a ``tuple`` field takes a YAML list, kept
as a tuple); its ``metadata`` may add ``doc`` (one line), ``min`` / ``max`` (a number's bounds; a string's least
length for ``min``), ``min_open`` (the minimum itself is excluded), ``choices`` (the values allowed; for a
``list`` or ``tuple`` field, the values its items may take) and ``check`` (``(predicate, what it expects)``, for
what the type cannot say). Also the checks the settings share (:func:`is_int`, :func:`is_number`, :func:`is_label`,
:func:`is_http_url`, :func:`did_you_mean`) and :class:`ConfigError`, the error they are reported by.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import typing
import urllib.parse
from collections.abc import Mapping

MAX_INT = 10**9  # step counts, sizes and other integers of the settings
MAX_LABEL = 128  # characters of a label value (run, sink name)
LABEL = f"a string of 1 to {MAX_LABEL} printable characters"  # what is_label accepts


class ConfigError(ValueError):
    """A bad monitor setting; the message names the source and the key."""


def is_int(v, lo: int = 0, hi: int = MAX_INT) -> bool:
    """``v`` is an integer (not a bool) in ``lo..hi``."""
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def is_number(v, lo: float, hi: float) -> bool:
    """``v`` is a finite int or float (not a bool) in ``lo..hi``."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi


def is_label(v) -> bool:
    """``v`` is a string of 1..:data:`MAX_LABEL` printable characters (a Prometheus label value, a name)."""
    return isinstance(v, str) and 0 < len(v) <= MAX_LABEL and v.isprintable()


def is_http_url(v) -> bool:
    """``v`` is an ``http://`` or ``https://`` URL with a host and no whitespace or control characters."""
    if not isinstance(v, str) or not v.isprintable() or any(c.isspace() for c in v):
        return False
    try:
        parts = urllib.parse.urlsplit(v)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def did_you_mean(name: str, known) -> str:
    """``"did you mean 'x'? "`` for the known name closest to a mistyped ``name``, else ``""``."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _mistyped(value, meta) -> str:
    """``"'x': did you mean 'y'? "`` for the first string of ``value`` (a value or a list of them) that is none
    of the field's ``choices`` but close to one, else ``""``."""
    choices = meta.get("choices")
    if not choices:
        return ""
    for v in value if isinstance(value, (list, tuple)) else (value,):
        if isinstance(v, str) and v not in choices and (hint := did_you_mean(v, [str(c) for c in choices])):
            return f"{v!r}: {hint}"
    return ""


_KIND = {bool: "true or false", str: "a string", dict: "a mapping", list: "a list", tuple: "a list"}


def _expects(tp, meta) -> str:
    """What a field of type ``tp`` with ``meta`` expects, in words."""
    if "check" in meta:
        return meta["check"][1]
    if "choices" in meta:
        names = [str(c) for c in meta["choices"]]
        if tp in (list, tuple):
            return f"a list of {', '.join(names)}"
        return " or ".join(names) if len(names) <= 2 else f"one of {', '.join(names)}"
    kinds = []
    for t in typing.get_args(tp) or (tp,):
        if t is int:
            kinds.append(f"an integer {meta.get('min', 0)}..{meta.get('max', MAX_INT)}")
        elif t is float:
            lo, hi = meta.get("min", 0), meta.get("max", math.inf)
            kinds.append(f"a positive finite number up to {hi:g}" if meta.get("min_open") and lo == 0
                         else f"a finite number {lo:g}..{hi:g}")
        elif t is str and meta.get("min"):
            kinds.append("a non-empty string")
        elif t is not type(None):
            kinds.append(_KIND[t])
    return f"{', '.join(kinds)} or null" if type(None) in typing.get_args(tp) else " or ".join(kinds)


def _ok(value, tp, meta) -> bool:
    if "check" in meta:
        return meta["check"][0](value)
    if "choices" in meta:
        if tp in (list, tuple):
            return isinstance(value, (list, tuple)) and all(v in meta["choices"] for v in value)
        return value in meta["choices"]
    for t in typing.get_args(tp) or (tp,):
        if t is type(None):
            if value is None:
                return True
        elif t is int:
            if is_int(value, meta.get("min", 0), meta.get("max", MAX_INT)):
                return True
        elif t is float:
            lo = meta.get("min", 0)
            if is_number(value, lo, meta.get("max", math.inf)) and not (meta.get("min_open") and value == lo):
                return True
        elif t is bool:
            if isinstance(value, bool):
                return True
        elif t is tuple:
            if isinstance(value, (list, tuple)):
                return True
        elif isinstance(value, t) and not (t is str and len(value) < meta.get("min", 0)):
            return True
    return False


def keypath(path: tuple) -> str:
    """The key path ``path`` as text, list items by index: ``alerts.sinks[0].url``."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")


def located(source: str, lines: Mapping | None, path: tuple) -> str:
    """``SOURCE:LINE: key.path`` of the key at ``path`` (:func:`keypath`), without ``:LINE`` when ``lines``
    (:func:`training_monitor.yamlfile.load_yaml`) does not know it."""
    keys = keypath(path)
    line = (lines or {}).get(tuple(path))
    return f"{source}:{line}: {keys}" if line else f"{source}: {keys}"


def check(cls, data: Mapping | None, source: str, lines: Mapping | None = None, path: tuple = (),
          error: type[Exception] = ConfigError, what: str = "setting", bounds: Mapping | None = None):
    """``cls(**data)`` (``cls`` a dataclass) once every key is one of its fields, every value fits its field and
    every field without a default is given.

    ``lines``: the 1-based line of each key by key path (:func:`training_monitor.yamlfile.load_yaml`), ``path`` the
    key path of ``data`` in that document. ``bounds``: metadata every field has unless it sets its own (e.g.
    ``{"max": 10**7}``). Raises ``error`` (a :class:`ConfigError` by default) naming every key that is wrong,
    one per line, as ``SOURCE[:LINE]: path.key: expected ..., got VALUE`` (VALUE not shown for a field whose metadata
    says ``"secret": True``), or ``SOURCE[:LINE]: path.key: unknown WHAT (did you mean ...? known: ...)``.
    """
    known = {f.name: f for f in dataclasses.fields(cls)}
    meta = {k: {**(bounds or {}), **f.metadata} for k, f in known.items()}
    hints = typing.get_type_hints(cls)
    lines = lines or {}

    def at(key):
        return located(source, lines, (*path, key))

    values, problems = dict(data or {}), []
    for key, value in values.items():
        if key not in known:
            problems.append(f"{at(key)}: unknown {what} ({did_you_mean(key, known)}known: {', '.join(known)})")
        elif not _ok(value, hints[key], meta[key]):
            got = "something else (not shown: it may be a secret)" if meta[key].get("secret") else repr(value)
            problems.append(f"{at(key)}: {_mistyped(value, meta[key])}expected {_expects(hints[key], meta[key])}, "
                            f"got {got}")
        elif hints[key] is tuple:
            values[key] = tuple(value)
    for key, f in known.items():
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and key not in values:
            problems.append(f"{at(key)}: expected {_expects(hints[key], meta[key])}, got nothing")
    if problems:
        raise error("\n".join(problems))
    return cls(**values)
