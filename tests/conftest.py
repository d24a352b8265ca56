"""Shared helpers: tiny real MindSpore training runs on CPU, loguru capture, and a check that no log a test
writes holds a secret it configured."""
import os
from pathlib import Path

import pytest
from loguru import logger

import services
from services import binary

LOG_FILES = ("*.log", "*.jsonl", "*.csv", "*.txt", "*.out", "*.err")

try:  # MindSpore's generated protobuf modules fail to load after TensorBoard's ("Descriptors cannot be
    import mindspore  # noqa: F401  created directly"); loading MindSpore first, as training programs do, works
except ImportError:
    pass


@pytest.fixture
def log_lines():
    """Messages loguru emits during the test (formatted as the product's handlers do: no variable values)."""
    lines = []
    sink = logger.add(lambda m: lines.append(str(m)), level="DEBUG", diagnose=False, backtrace=False)
    yield lines
    logger.remove(sink)


@pytest.fixture(autouse=True)
def no_secret_in_logs(request):
    """After every test: no secret registered in :data:`services.SECRETS` is in a message the product logged
    (formatted as its handlers do) or in a log file under the test's ``tmp_path`` (its subprocesses' output,
    the monitor's event and record logs)."""
    lines = []
    sink = logger.add(lambda m: lines.append(str(m)), level="DEBUG", diagnose=False, backtrace=False)
    yield
    try:
        logger.remove(sink)
    except ValueError:  # a CLI under test replaced every handler (training_monitor.log.to_stderr)
        pass
    texts = {"loguru": "\n".join(lines)}
    tmp = request.node.funcargs.get("tmp_path")
    if tmp is not None:
        texts.update({str(f): f.read_text(errors="replace") for pattern in LOG_FILES
                      for f in Path(tmp).rglob(pattern) if f.is_file() and f.stat().st_size < 16 << 20})
    leaks = [(where, s) for s in services.SECRETS for where, text in texts.items() if s in text]
    assert not leaks, f"secrets in logs: {leaks}"


def require(module: str):
    """Import ``module``; skip when it is missing, but fail under CI, where the README's set-up installs it."""
    try:
        return __import__(module)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{module} not installed: dev.sh test installs the project's extras")
        pytest.skip(f"{module} not installed", allow_module_level=True)


@pytest.fixture
def promtool():
    """Path of Prometheus' promtool (Debian package ``prometheus``); required under CI."""
    return binary("promtool")


@pytest.fixture
def amtool():
    """Path of Alertmanager's amtool (Debian package ``prometheus-alertmanager``); required under CI."""
    return binary("amtool")
