"""Shared helpers: tiny real MindSpore training runs on CPU, and loguru capture."""
import os

import pytest
from loguru import logger

from services import binary

try:  # MindSpore's generated protobuf modules fail to load after TensorBoard's ("Descriptors cannot be
    import mindspore  # noqa: F401  created directly"); loading MindSpore first, as training programs do, works
except ImportError:
    pass


@pytest.fixture
def log_lines():
    """Messages loguru emits during the test."""
    lines = []
    sink = logger.add(lambda m: lines.append(str(m)), level="DEBUG")
    yield lines
    logger.remove(sink)


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
