"""Restore a checkpoint into a live train network and lower its learning rate, in the same process."""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import ops

from .lr import lr_scale_parameters, set_lr_scale


def train_optimizer(train_network, optimizer=None):
    """The optimizer of a train-step cell (``cb_params.optimizer`` is None when ``Model`` got a cell)."""
    opt = optimizer if optimizer is not None else getattr(train_network, "optimizer", None)
    if opt is None:
        raise TypeError(f"{type(train_network).__name__} has no optimizer to roll back")
    return opt


def global_step(train_network, optimizer=None) -> int:
    """The optimizer's ``global_step`` (updates applied, as restored by a loaded checkpoint); 0 when it has none."""
    step = getattr(optimizer if optimizer is not None else getattr(train_network, "optimizer", None), "global_step",
                   None)
    return int(step.asnumpy().reshape(-1)[0]) if step is not None else 0


def nonfinite_parameters(network) -> list[str]:
    """Names of the trainable parameters of ``network`` holding a NaN or an Inf (empty: all finite). One pass
    over the weights on their device and one synchronisation: the flags are read together."""
    params = network.trainable_params()
    if not params:
        return []
    flags = ops.stack([ops.isfinite(p).all() for p in params]).asnumpy()
    return [p.name for p, ok in zip(params, flags) if not ok]


def holds_checkpoint(train_network, optimizer, path: str, count: int = 3) -> bool:
    """Whether ``train_network``'s weights are those of the checkpoint file ``path`` (the trainer loaded it and has
    not trained since): the ``count`` smallest of the weights its optimizer updates, read alone from the file, are
    equal to the network's (cast to their dtype). False too when the file lacks one of them. Reads a few small
    tensors; one synchronisation per weight compared.

    Raises:
        TypeError: the train network has no optimizer.
        ValueError, RuntimeError, OSError: the file cannot be read as a checkpoint.
    """
    params = sorted(train_optimizer(train_network, optimizer).parameters, key=lambda p: p.size)[:count]
    names = {p.name for p in params}
    saved = ms.load_checkpoint(path, choice_func=names.__contains__)
    return all(p.name in saved and np.array_equal(saved[p.name].astype(p.dtype).astype(ms.float32).asnumpy(),
                                                  p.astype(ms.float32).asnumpy(), equal_nan=True) for p in params)


def save_train_state(train_network, path: str) -> None:
    """Save every parameter of the train-step cell: weights, optimizer moments, global step, loss scale."""
    ms.save_checkpoint(train_network, path)


def lr_scale(train_network, optimizer=None) -> float:
    """The LR multiplier in force: the value of :func:`~training_monitor.callbacks.lr.lr_scale_parameters` (a fixed
    LR itself, for a ``Parameter`` learning rate).

    Raises:
        TypeError: the learning rate cannot be scaled in place.
    """
    return float(lr_scale_parameters(train_network, train_optimizer(train_network, optimizer))[0].asnumpy())


# the names (last part) of a loss scale's value: a trainer's state that a checkpoint may lack (MindFormers' resume makes
# its dynamic loss-scale manager's value, `loss_scaling_manager.loss_scale_value`, a parameter of the network: the
# checkpoints saved before the restart have none)
LOSS_SCALE_NAMES = frozenset(("loss_scale_value", "scale_sense", "loss_scale"))


def restore_train_state(train_network, optimizer, path: str, scale: float) -> list[str]:
    """Load ``path`` into ``train_network`` (weights, optimizer moments, ``global_step``, loss scale), then set the
    LR multiplier to ``scale`` (for a rollback: :func:`lr_scale` before it times its factor, the same for every
    checkpoint it tries, so one rollback cuts the LR once however many loads it takes). A loss scale the checkpoint
    lacks (:data:`LOSS_SCALE_NAMES`) keeps its value; returns the names of those kept.

    Raises:
        TypeError: the learning rate cannot be scaled in place (see
            :func:`training_monitor.callbacks.lr.lr_scale_parameters`).
        ValueError, RuntimeError, OSError: the checkpoint cannot be read or does not fit the network.
    """
    scales = lr_scale_parameters(train_network, train_optimizer(train_network, optimizer))
    params = ms.load_checkpoint(path)
    own = [p for p in train_network.get_parameters() if p.name in params]
    kept = [p.name for p in train_network.get_parameters() if p.name not in params]
    missing = [name for name in kept if name.rpartition(".")[2] not in LOSS_SCALE_NAMES]
    if missing:
        raise ValueError(f"{path}: checkpoint lacks {len(missing)} parameters of the network, e.g. {missing[0]}")
    for p in own:
        if tuple(params[p.name].shape) != tuple(p.shape):
            raise ValueError(f"{path}: {p.name} has shape {tuple(params[p.name].shape)}, the network's is "
                             f"{tuple(p.shape)}")
    # Measured on CPU, MindSpore 2.9: a jit-compiled step (an ms.jit train step, an optimizer's jit construct
    # in PyNative mode, a LearningRateSchedule in a graph-mode train-step cell) keeps the tensors it was
    # compiled with: after Parameter.set_data (what load_param_into_net does) it does not see the load, or
    # its updates no longer reach the parameters. ops.assign writes into those tensors: every value is
    # assigned in place.
    for p in own:
        ops.assign(p, params[p.name].astype(p.dtype))
    set_lr_scale(scales, scale)
    return kept
