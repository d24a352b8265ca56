"""The other callbacks of the same ``Model.train`` call, as
:class:`training_monitor.callbacks.TrainingMonitor` meets them.

Some callbacks end the run by raising on a non-finite loss in ``on_train_step_end``: MindSpore's
``LossMonitor`` (``ValueError: ... loss is NAN or INF``, always) and MindFormers' ``TrainingStateMonitor``
(``ValueError`` with ``check_for_nan_in_loss_and_grad``; ``RuntimeError: TREError`` with
``check_for_global_norm``, MindFormers' hand-over to a process restart; ``ValueError`` when
``use_skip_data_by_global_norm`` has skipped too many batches in a row). :func:`nan_checks` finds them,
and :func:`hook_step_end` lets the monitor judge the step before such a callback sees it and skip that
callback's step end on a step the monitor has undone (rolled back) or is stopping at.

MindFormers evaluates during training (``do_eval``) through its ``EvalCallBack``, which calls ``Model.eval``
without the training's callbacks and only logs the results: :func:`evaluators` finds it and :func:`hook_eval`
hands each evaluation's results to the monitor.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

from mindspore.train import LossMonitor

# TrainingStateMonitor's settings that make it raise in its step end, and on what (MindFormers 1.9)
_STATE_MONITOR_CHECKS = (
    ("check_for_nan_in_loss_and_grad", "a NaN/Inf loss or norm"),
    ("check_for_global_norm", "a global norm over its threshold (TRE)"),
    ("use_skip_data_by_global_norm", "a global norm over its threshold too many steps in a row"),
)


def nan_checks(callbacks) -> list[tuple[object, str]]:
    """The callbacks among ``callbacks`` that raise on a NaN/Inf step, each with what it checks (words)."""
    found = []
    state_monitor: type | None = None
    if "mindformers" in sys.modules:
        from mindformers.core.callback import TrainingStateMonitor

        state_monitor = TrainingStateMonitor
    for c in callbacks:
        if isinstance(c, LossMonitor):
            found.append((c, "LossMonitor raises ValueError on a NaN/Inf loss"))
        elif state_monitor is not None and isinstance(c, state_monitor):
            checks = [what for flag, what in _STATE_MONITOR_CHECKS if getattr(c, flag, False)]
            if checks:
                found.append((c, f"TrainingStateMonitor raises on {' and on '.join(checks)}"))
    return found


def hook_step_end(callback, before: Callable | None = None, skip: Callable[[], bool] | None = None,
                  after: Callable[[], None] | None = None) -> None:
    """Wrap ``callback.on_train_step_end(run_context)``: call ``before(run_context)`` first, run the callback's
    own step end unless ``skip()`` is true, then call ``after()``. :func:`unhook` undoes it (the callback is
    the user's object and may be used again without the monitor)."""
    original = callback.on_train_step_end

    def step_end(run_context):
        if before is not None:
            before(run_context)
        if skip is None or not skip():
            original(run_context)
        if after is not None:
            after()

    callback.on_train_step_end = step_end


def evaluators(callbacks) -> list:
    """MindFormers' ``EvalCallBack`` instances among ``callbacks`` (none when MindFormers is not imported)."""
    if "mindformers" not in sys.modules:
        return []
    from mindformers.core.callback import EvalCallBack

    return [c for c in callbacks if isinstance(c, EvalCallBack)]


def hook_eval(callback, evaluated: Callable[[dict], object]) -> None:
    """Wrap an ``EvalCallBack``'s ``eval_func``: its results (a metric name -> value dict) also go to
    ``evaluated``. :func:`unhook` undoes it."""
    original = callback.eval_func

    def eval_func(*args, **kwargs):
        out = original(*args, **kwargs)
        evaluated(out if isinstance(out, dict) else {})
        return out

    callback.__dict__["_unhooked_eval_func"] = original
    callback.eval_func = eval_func


def unhook(callback) -> None:
    """Remove every :func:`hook_step_end` and :func:`hook_eval` wrapper from ``callback``."""
    callback.__dict__.pop("on_train_step_end", None)
    original = callback.__dict__.pop("_unhooked_eval_func", None)
    if original is not None:
        callback.eval_func = original
