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


def test_a_mistyped_choice_gets_did_you_mean():
    with pytest.raises(ConfigError, match=r"^s: mode: 'contine': did you mean 'continue'\? expected stop or continue"):
        check(Sink, {"mode": "contine"}, "s")
    with pytest.raises(ConfigError, match=r"^s: mode: expected stop or continue, got 'x'$"):  # nothing close
        check(Sink, {"mode": "x"}, "s")


def test_a_key_given_twice_is_an_error_at_its_second_line(tmp_path):
    # PyYAML keeps the last of two equal keys silently: a new user's second `low_mfu:` block undid the first
    path = tmp_path / "rules.yaml"
    path.write_text("low_mfu: {enabled: false}\nloss_spike:\n  threshold: 7\nlow_mfu:\n  floor: 0.1\n")
    with pytest.raises(ConfigError, match=rf"^{path}:4: low_mfu: given twice \(first at line 1\); keep one$"):
        load_yaml(path)
    path.write_text("sink:\n  name: x\n  every: 3\n  every: 4\n")
    with pytest.raises(ConfigError, match=rf"^{path}:4: sink.every: given twice \(first at line 3\)"):
        load_yaml(path)
    path.write_text("sinks:\n- type: slack\n  url: http://a\n  url: http://b\n")  # as check() names list items
    with pytest.raises(ConfigError, match=rf"^{path}:4: sinks\[0\]\.url: given twice \(first at line 3\)"):
        load_yaml(path)


def test_a_rules_or_alerts_file_named_in_a_settings_file_is_beside_it(tmp_path, monkeypatch):
    """msrun starts workers wherever the job was launched: `rules: r.yaml` in cfg/monitor.yaml means cfg/r.yaml,
    read when the settings are; a missing one names the settings file, its line and the key."""
    import pytest

    from training_monitor.config import MonitorConfig

    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "r.yaml").write_text("loss_spike:\n  threshold: 5\n")
    (cfg / "monitor.yaml").write_text("run: x\nrules: r.yaml\n")
    monkeypatch.chdir(tmp_path)
    assert MonitorConfig.from_yaml(cfg / "monitor.yaml").rules == str(cfg / "r.yaml")
    (cfg / "bad.yaml").write_text("monitor:\n  run: x\n  alerts: missing.yaml\n")
    with pytest.raises(ConfigError, match=rf"^{cfg / 'bad.yaml'}:3: monitor.alerts: {cfg / 'missing.yaml'}: cannot read"):
        MonitorConfig.from_yaml(cfg / "bad.yaml")
