"""Shared helpers: loguru capture, a check that no log a test writes holds a secret it configured, the tools of
the Debian packages the tests use, and the ``services`` marker of the tests that use them. The markers
(``slow``, ``services``, ``mindspore``) are declared in pyproject.toml."""
import ast
import itertools
import os
import re
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # pytest's own reading of -m
from loguru import logger

import services
from services import binary

LOG_FILES = ("*.log", "*.jsonl", "*.csv", "*.txt", "*.out", "*.err")

try:  # MindSpore's generated protobuf modules fail to load after TensorBoard's ("Descriptors cannot be
    import mindspore  # noqa: F401  created directly"); loading MindSpore first, as training programs do, works
except ImportError:
    pass


def _module_marks(path: Path) -> set[str]:
    """The markers of a test module's ``pytestmark = pytest.mark.X`` or ``[pytest.mark.X, ...]``, read from
    its source (without importing it)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, ast.List) else [node.value]
            return {v.attr for v in values if isinstance(v, ast.Attribute)}
    return set()


def pytest_ignore_collect(collection_path: Path, config):
    """A test module whose module-level markers alone make ``-m`` leave out every test in it is not imported
    (several import MindSpore and MindFormers, seconds each: most of the fast lane's time otherwise). Exact
    for any expression: it is false for every value of the other names in it."""
    expression = config.getoption("markexpr")
    if not expression or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    marks = _module_marks(collection_path)
    if not marks:
        return None
    other = sorted(set(re.findall(r"[\w.]+", expression)) - {"and", "or", "not"} - marks)
    compiled = Expression.compile(expression)
    for values in itertools.product((False, True), repeat=len(other)):
        chosen = marks | {name for name, on in zip(other, values, strict=True) if on}
        if compiled.evaluate(lambda name, chosen=chosen, **_: name in chosen):
            return None
    return True


def pytest_collection_modifyitems(items):
    """A test that uses Prometheus' or Alertmanager's tool (fixtures ``promtool``, ``amtool``) needs those
    packages: it gets the ``services`` marker, as the tests that start the servers have by hand."""
    for item in items:
        if {"promtool", "amtool"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


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
