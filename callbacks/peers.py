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

MindSpore's ``LearningRateScheduler`` writes ``learning_rate_function(lr, step)`` into the optimizer's
``learning_rate`` Parameter at every step end, which would undo the LR cut of a rollback (a function of the
step alone) and leave the monitor's record of the LR stale: :func:`schedulers` finds it and
:func:`hook_lr_function` keeps the cut and tells the monitor each LR it sets.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

from mindspore.train import LearningRateScheduler, LossMonitor

# TrainingStateMonitor's settings that make it raise in its step end, and on what (MindFormers 1.9)
_STATE_MONITOR_CHECKS = (
    ("check_for_nan_in_loss_and_grad", "a NaN/Inf loss or norm"),
    ("check_for_global_norm", "a global norm over its threshold (TRE)"),
    ("use_skip_data_by_global_norm", "a global norm over its threshold too many steps in a row"),
)


def nan_checks(callbacks) -> list[tuple[object, str, bool]]:
    """The callbacks among ``callbacks`` that raise on a NaN/Inf step, each with what it checks (words) and
    whether it checks the loss alone (it raises only on a step whose loss is not finite)."""
    found = []
    state_monitor: type | None = None
    if "mindformers" in sys.modules:
        from mindformers.core.callback import TrainingStateMonitor

        state_monitor = TrainingStateMonitor
    for c in callbacks:
        if isinstance(c, LossMonitor):
            found.append((c, "LossMonitor raises ValueError on a NaN/Inf loss", True))
        elif state_monitor is not None and isinstance(c, state_monitor):
            checks = [what for flag, what in _STATE_MONITOR_CHECKS if getattr(c, flag, False)]
            if checks:
                found.append((c, f"TrainingStateMonitor raises on {' and on '.join(checks)}", False))
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


def schedulers(callbacks) -> list:
    """MindSpore's ``LearningRateScheduler`` instances among ``callbacks``."""
    return [c for c in callbacks if isinstance(c, LearningRateScheduler)]


def hook_lr_function(callback, multiplier: Callable[[], float], applied: Callable[[float], None]) -> None:
    """Wrap a ``LearningRateScheduler``'s ``learning_rate_function(lr, step)`` as ``f(lr / m, step) * m``, with
    ``m = multiplier()`` the monitor's LR multiplier (the product of its rollbacks' LR factors): the schedule
    runs on its own scale and the cut stays, for a function of the step (``1e-3 * 0.99 ** (step // 10)``) as
    for one of the LR (``lr * 0.99``). ``applied`` gets each LR it returns. :func:`unhook` undoes it."""
    original = callback.learning_rate_function

    def learning_rate_function(lr, step):
        m = multiplier()
        new = original(lr / m, step) * m
        applied(float(new))
        return new

    callback.__dict__["_unhooked_lr_function"] = original
    callback.learning_rate_function = learning_rate_function


def unhook(callback) -> None:
    """Remove every :func:`hook_step_end`, :func:`hook_eval` and :func:`hook_lr_function` wrapper from
    ``callback``."""
    callback.__dict__.pop("on_train_step_end", None)
    original = callback.__dict__.pop("_unhooked_eval_func", None)
    if original is not None:
        callback.eval_func = original
    original = callback.__dict__.pop("_unhooked_lr_function", None)
    if original is not None:
        callback.learning_rate_function = original
