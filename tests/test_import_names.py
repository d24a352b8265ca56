"""The product imports as ``training_monitor``: a training repository's own ``callbacks.py`` / ``monitor.py``
beside the script (common in training repos) neither shadows it nor is shadowed by it."""
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.mindspore
def test_a_user_script_with_its_own_callbacks_and_monitor_modules_imports_the_product(tmp_path):
    (tmp_path / "callbacks.py").write_text("USER = 'callbacks'\n")
    (tmp_path / "monitor.py").write_text("USER = 'monitor'\n")
    (tmp_path / "train.py").write_text(textwrap.dedent("""\
        import callbacks, monitor
        from training_monitor import TrainingMonitor, ScaledLearningRate, StepRecord, Rules
        Rules()  # the shipped rules file is found by the package, wherever the script runs
        from training_monitor.callbacks import TrainingMonitor as Same
        assert callbacks.USER == 'callbacks' and monitor.USER == 'monitor'
        assert TrainingMonitor is Same and TrainingMonitor.__module__ == 'training_monitor.callbacks.training_monitor'
        print(TrainingMonitor.__name__, ScaledLearningRate.__name__, StepRecord.__name__)
        """))
    out = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["TrainingMonitor", "ScaledLearningRate", "StepRecord"]


@pytest.mark.mindspore
def test_the_core_package_does_not_load_mindspore_until_an_adapter_is_asked_for():
    code = ("import sys, training_monitor; assert 'mindspore' not in sys.modules; "
            "training_monitor.Engine; assert 'mindspore' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_the_command_runs_outside_the_repository(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"epoch: 0, step: {i}, loss is {2.5 - i / 100}\n" for i in range(40)))
    out = subprocess.run([sys.executable, "-c", "from training_monitor.cli import main; main()", "replay", "--json",
                          str(log)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"steps": 40' in out.stdout
