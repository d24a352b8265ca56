"""Settings and rules files: YAML read with bounds (size, depth, no aliases, finite numbers) and the line of
each key, so that a bad value is reported as ``FILE:LINE: key: reason``."""
from __future__ import annotations

import math
from pathlib import Path

import yaml

from .schema import ConfigError, keypath

MAX_YAML_BYTES = 1 << 20  # a settings or rules file
MAX_YAML_DEPTH = 32  # nested mappings and lists


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases (so nothing is expanded, whatever walks the document) and
    nesting deeper than :data:`MAX_YAML_DEPTH`, before the node is built."""

    depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise yaml.MarkedYAMLError(problem="YAML aliases (*name) are not accepted here; write the value out",
                                       problem_mark=event.start_mark)
        self.depth += 1
        if self.depth > MAX_YAML_DEPTH:
            raise yaml.MarkedYAMLError(problem=f"nested deeper than {MAX_YAML_DEPTH} levels",
                                       problem_mark=event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml(path: str | Path, what: str = "settings file") -> tuple[object, dict[tuple, int]]:
    """The YAML document at ``path`` (at most :data:`MAX_YAML_BYTES`, no aliases, nested at most
    :data:`MAX_YAML_DEPTH` deep, every number finite, no key given twice in a mapping) and the 1-based line of
    each mapping key, by key path.

    Raises:
        ConfigError: ``FILE:LINE: reason`` (``FILE:LINE: key.path: reason`` for a number that is not finite or a
            key given twice).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_YAML_BYTES >> 10} KiB, too large for a {what}")
    loader = _BoundedLoader(raw.decode("utf-8", "replace"))
    try:
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"{path}:{mark.line + 1 if mark else 1}: not valid YAML: "
                          f"{getattr(exc, 'problem', None) or exc}") from None
    finally:
        loader.dispose()
    lines: dict[tuple, int] = {}

    def walk(n, keys):
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = keys + (k.value,)
                if key in lines:  # YAML leaves it undefined; PyYAML keeps the last silently
                    raise ConfigError(f"{path}:{k.start_mark.line + 1}: {keypath(key)}: "
                                      f"given twice (first at line {lines[key]}); keep one")
                lines[key] = k.start_mark.line + 1
                walk(v, key)
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                walk(v, keys + (i,))
        elif n.tag == "tag:yaml.org,2002:float" and not math.isfinite(loader.construct_yaml_float(n)):
            raise ConfigError(f"{path}:{n.start_mark.line + 1}: {keypath(keys)}: expected a finite "
                              f"number, got {n.value}")

    if node is not None:
        walk(node, ())
    return data, lines
