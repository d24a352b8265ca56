"""The ``monitor`` command finds its other commands (``monitor demo`` among them) through the
``training_monitor.commands`` entry point group, importing none of them before it is run or listed."""
import subprocess
import sys

import pytest
from click.testing import CliRunner

from training_monitor.cli import main

PLUGIN = '''import click

@click.command()
@click.argument("name")
def hello(name):
    """Say hello."""
    click.echo(f"hello {name}")
'''


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package installed on sys.path (module + dist-info metadata) whose entry points are ``commands``."""

    def install(commands: dict[str, str]):
        (tmp_path / "hello_plugin.py").write_text(PLUGIN)
        info = tmp_path / "hello_plugin-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-plugin\nVersion: 1.0\n")
        lines = "".join(f"{name} = {target}\n" for name, target in commands.items())
        (info / "entry_points.txt").write_text(f"[training_monitor.commands]\n{lines}")
        monkeypatch.syspath_prepend(str(tmp_path))

    return install


def test_a_command_of_another_installed_package_runs_and_is_listed(installed):
    installed({"hello": "hello_plugin:hello"})
    out = CliRunner().invoke(main, ["hello", "world"])
    assert out.exit_code == 0 and out.output == "hello world\n"
    listed = CliRunner().invoke(main, ["--help"]).output
    assert "hello" in listed and "Say hello." in listed and "demo" in listed and "replay" in listed


def test_a_command_that_cannot_be_imported_fails_naming_it(installed):
    installed({"broken": "no_such_module:command"})
    out = CliRunner().invoke(main, ["broken"])
    assert out.exit_code == 2
    assert "monitor: error: cannot load the command 'broken' (no_such_module:command)" in out.output
    assert "No module named 'no_such_module'" in out.output


def test_demo_options_are_checked_before_the_run(tmp_path):
    out = CliRunner().invoke(main, ["demo", "--inject", "flood@3", "--output-dir", str(tmp_path / "d")])
    assert out.exit_code == 2 and "bad fault 'flood@3': expected KIND@STEP with KIND one of nan, spike" in out.output
    out = CliRunner().invoke(main, ["demo", "--steps", "10", "--inject", "nan@20"])
    assert out.exit_code == 2 and "nan@20 is past the last step (10)" in out.output
    assert not (tmp_path / "d").exists()


@pytest.mark.slow  # a fresh interpreter: what the core imports by itself
def test_the_core_cli_imports_no_command_plug_in_nor_adapter():
    code = ("import sys, training_monitor.cli as cli; from click.testing import CliRunner; "
            "assert 'demo' in CliRunner().invoke(cli.main, ['--help']).output; "  # listing loads the plug-in ...
            "loaded = sorted(m for m in sys.modules if m.startswith(('training_monitor.callbacks', 'mindspore'))); "
            "assert not loaded, loaded")  # ... which imports no MindSpore and no adapter until the demo runs
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
