"""Checking dashboard JSON against the Grafana 11.6 dashboard model (grafana-foundation-sdk's model classes),
for the tests of the dashboards that :mod:`training_monitor.dashboards` generates."""
from __future__ import annotations

import enum
import json
import types
import typing

from grafana_foundation_sdk.cog.encoder import JSONEncoder


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
        return [p for i, (a, b) in enumerate(zip(original, again, strict=True)) for p in _diff(a, b, f"{path}/{i}")]
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
        same = [r for a, r in zip(args, results, strict=True)
                if isinstance(a, type) and _is_model(a) and isinstance(value, a)]
        real = same or [r for a, r in zip(args, results, strict=True) if a is not type(None)]
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
