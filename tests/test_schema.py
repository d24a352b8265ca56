"""The settings validator: a dataclass's field types and metadata say what each key accepts."""
from dataclasses import dataclass, field

import pytest

from training_monitor.schema import ConfigError, check
from training_monitor.yamlfile import load_yaml


@dataclass
class Sink:
    name: str = field(default="a", metadata={"doc": "the sink's name", "min": 1})
    every: int = field(default=1, metadata={"min": 1, "max": 100})
    factor: float = field(default=0.5, metadata={"min": 0, "max": 1, "min_open": True})
    mode: str = field(default="stop", metadata={"choices": ("stop", "continue")})
    on: bool | None = None
    target: str | dict | None = None
    even: int = field(default=2, metadata={"check": (lambda v: isinstance(v, int) and v % 2 == 0, "an even number")})


def test_values_that_fit_build_the_dataclass():
    got = check(Sink, {"name": "x", "every": 100, "factor": 1, "mode": "continue", "on": None, "target": {}}, "s")
    assert got == Sink("x", 100, 1, "continue", None, {})


@pytest.mark.parametrize("key, value, expects", [
    ("name", "", "a non-empty string"), ("every", 0, "an integer 1..100"), ("every", True, "an integer 1..100"),
    ("factor", 0, "a positive finite number up to 1"), ("factor", float("nan"), "a positive finite number up to 1"),
    ("mode", "go", "stop or continue"), ("on", "yes", "true or false or null"),
    ("target", 3, "a string, a mapping or null"), ("even", 3, "an even number"),
])
def test_a_value_that_does_not_fit_names_the_key_and_what_it_expects(key, value, expects):
    with pytest.raises(ConfigError) as err:
        check(Sink, {key: value}, "sinks.yaml")
    assert str(err.value) == f"sinks.yaml: {key}: expected {expects}, got {value!r}"


def test_errors_name_the_line_and_a_typo_gets_did_you_mean(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("sink:\n  name: x\n  evrey: 3\n")
    data, lines = load_yaml(path)
    with pytest.raises(ConfigError, match=rf"^{path}:3: sink.evrey: unknown sink setting \(did you mean 'every'\? known: "
                                          "name, every, factor"):
        check(Sink, data["sink"], str(path), lines, ("sink",), what="sink setting")
    path.write_text("sink:\n  name: x\n  every: 300\n")
    data, lines = load_yaml(path)
    with pytest.raises(ValueError, match=rf"^{path}:3: sink.every: expected an integer 1..100, got 300$"):
        check(Sink, data["sink"], str(path), lines, ("sink",), error=ValueError)
