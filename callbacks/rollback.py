"""Restore a checkpoint into a live train network and lower its learning rate, in the same process."""
from __future__ import annotations

import mindspore as ms
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


def restore_train_state(train_network, optimizer, path: str, scale: float) -> None:
    """Load ``path`` into ``train_network`` (weights, optimizer moments, ``global_step``, loss scale), then set the
    LR multiplier to ``scale`` (for a rollback: :func:`lr_scale` before it times its factor, the same for every
    checkpoint it tries, so one rollback cuts the LR once however many loads it takes).

    Raises:
        TypeError: the learning rate cannot be scaled in place (see
            :func:`training_monitor.callbacks.lr.lr_scale_parameters`).
        ValueError, RuntimeError, OSError: the checkpoint cannot be read or does not fit the network.
    """
    scales = lr_scale_parameters(train_network, train_optimizer(train_network, optimizer))
    params = ms.load_checkpoint(path)
    own = list(train_network.get_parameters())
    missing = [p.name for p in own if p.name not in params]
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
