"""The monitor in a functional training loop: ``mindspore.value_and_grad`` and the optimizer called by hand,
the way MindSpore's quick start and parallel tutorials train, instead of ``Model.train``."""
from __future__ import annotations

import numpy as np
from mindspore import nn
from mindspore.train import RunContext
from mindspore.train.callback._callback import InternalCallbackParam

from training_monitor.log import logger

from .training_monitor import TrainingMonitor


class TrainState(nn.Cell):
    """The network and its optimizer as one cell, what ``Model.train``'s train-step cell is to the monitor:
    a checkpoint saves and loads it whole (weights, optimizer moments, ``global_step``, a
    :class:`~training_monitor.callbacks.ScaledLearningRate`'s scale). It is never called; the parameters keep
    their names (no prefix)."""

    def __init__(self, network: nn.Cell, optimizer: nn.Optimizer):
        super().__init__(auto_prefix=False)
        self.network = network
        self.optimizer = optimizer


class LoopMonitor:
    """Drives a :class:`~training_monitor.callbacks.TrainingMonitor` from a hand-written training loop through
    the callback objects ``Model.train`` uses (``mindspore.train.RunContext`` over MindSpore's callback
    parameters), so the monitor does there what it does as a ``Model.train`` callback: step records, TPS, MFU,
    ``/metrics``, the event and record logs, the rules, ``checkpoint_every`` saves (network and optimizer),
    rollback (loaded into ``network`` and ``optimizer``, LR scaled), stop and the watchdog::

        with LoopMonitor(monitor, net, optimizer) as loop:
            for epoch in range(epochs):
                for data, label in loop.batches(dataset.create_tuple_iterator()):
                    (loss, _), grads = grad_fn(data, label)
                    optimizer(grads)
                    if loop.step(loss):
                        break

    Entering calls the monitor's train begin, leaving its train end (also when the loop raised; with
    ``exit_on_stop``, leaving a run the monitor stopped raises ``SystemExit``). Monitor failures are logged
    and survived unless ``strict`` is set, as with ``Model.train``. Another block with the same monitor
    afterwards (a ``train_loop`` called once an epoch) continues the run: its steps are numbered on.

    What the loop itself owns: the data iterator is not rewound by a rollback, and batches are skipped
    (``skip_batches``) only when ``dataset`` is fed by a :class:`~training_monitor.callbacks.SkippableSource`;
    the grad norm, overflow flag, loss scale and a schedule's LR are known only when :meth:`step` is given them
    (a fixed ``Parameter`` LR is read from the optimizer). A ``DynamicLossScaler``'s scale is not in the
    checkpoint.

    Args:
        monitor: the monitor; one ``LoopMonitor`` at a time.
        network: the network the loop trains (its parameters are the ones the optimizer updates).
        optimizer: the ``nn.Optimizer`` the loop calls with the gradients.
        dataset: the training dataset, where the monitor looks for a ``SkippableSource`` (optional).
    """

    def __init__(self, monitor: TrainingMonitor, network: nn.Cell, optimizer: nn.Optimizer, dataset=None):
        """Raises:
            TypeError: ``monitor``, ``network`` or ``optimizer`` is not what it should be (arguments swapped)."""
        for name, value, kind in (("monitor", monitor, TrainingMonitor), ("network", network, nn.Cell),
                                  ("optimizer", optimizer, nn.Optimizer)):
            if not isinstance(value, kind) or name == "network" and isinstance(value, nn.Optimizer):
                raise TypeError(f"LoopMonitor(monitor, network, optimizer): {name} must be a {kind.__name__}, "
                                f"got {type(value).__name__}")
        self.monitor = monitor
        cb = InternalCallbackParam()  # the cb_params object Model.train fills
        cb.mode = "train"
        cb.train_network = TrainState(network, optimizer)
        cb.network = network
        cb.optimizer = optimizer
        cb.train_dataset = dataset
        cb.train_dataset_element = None
        cb.device_number = monitor.world_size  # tokens inferred from a batch count it once per device
        cb.list_callback = [monitor]
        cb.cur_step_num = 0
        cb.cur_epoch_num = 1
        cb.net_outputs = None
        # to the monitor, sink mode means "the step's begin is not seen": the step time runs from the previous
        # step's end, data wait is unknown; batches() marks each step's begin and switches it off
        cb.dataset_sink_mode = True
        self._cb = cb
        self._run = RunContext(cb)
        self._epochs = 0
        self._begun = 0  # the steps reported before the current block
        self._inside = False

    def __enter__(self) -> LoopMonitor:
        self.monitor.__enter__()
        self.monitor.on_train_begin(self._run)
        self._inside, self._begun = True, self._cb.cur_step_num
        return self

    def __exit__(self, *err) -> None:
        self._inside = False
        if err[0] is not None:  # the loop raised: no train end, the exception reported as Model.train's are
            self.monitor.__exit__(*err)
            return
        if self._cb.cur_step_num == self._begun:
            logger.warning("LoopMonitor: no step was reported in this block (call loop.step(loss) after each "
                           "optimizer step): nothing was monitored")
        try:
            self.monitor.on_train_end(self._run)
        finally:
            self.monitor.__exit__(*err)

    def batches(self, iterable):
        """Yield the items of ``iterable`` (one epoch of the loop's data: ``dataset.create_tuple_iterator()``,
        the dataset itself, any iterator), marking each step's begin once its batch is read, so the step time
        excludes reading it and the wait for it is the data wait. Each call is a new epoch. An item (a tuple,
        list or dict of tensors) is the step's inputs: without ``tokens_per_step``, the tokens are inferred
        from its first 2-D integer one (token ids) times the world size, as with ``Model.train``."""
        self._epochs += 1
        self._cb.cur_epoch_num = self._epochs
        self._cb.dataset_sink_mode = False
        for item in iterable:
            self._cb.train_dataset_element = (tuple(item.values()) if isinstance(item, dict) else
                                              item if isinstance(item, (tuple, list)) else (item,))
            self.monitor.on_train_step_begin(self._run)
            yield item

    def step(self, loss, grad_norm=None, overflow=None, loss_scale=None, lr=None) -> bool:
        """End the step the loop has just taken (after ``optimizer(grads)``) and let the monitor judge it.

        Args:
            loss: the step's loss (a scalar ``Tensor``, or a per-device array, averaged); reading it is the one
                device sync.
            grad_norm: the global norm of the step's gradients (scalar), if the loop computes it, for example
                ``ops.sqrt(ops.addn([ops.square(g).sum() for g in grads]))``.
            overflow: whether the step's gradients were not finite and the update was skipped
                (``not amp.all_finite(grads)``), if the loop scales the loss.
            loss_scale: the loss scale the step's loss was scaled by (``loss_scaler.scale_value``, read before
                ``loss_scaler.adjust``, which sets the next step's).
            lr: the learning rate the step's update used (a scalar): ``optimizer.get_lr()`` called before
                ``optimizer(grads)`` (after it, the optimizer's step count has moved on), or the schedule's value
                at the step. With a rollback's LR cut (:class:`ScaledLearningRate`) it is the cut LR. Needed for
                the LR series and the ``lr_surge`` rule when the LR is a schedule.

        Returns:
            True when the monitor has stopped the run (:attr:`stopped`): the loop should end.

        Raises:
            RuntimeError: called outside the ``with LoopMonitor(..)`` block (its train begin never ran: no
                checkpoints, no record log).
            TypeError: ``loss`` is not a number, scalar or 1-D (per-device) tensor or array (``grad_fn``'s
                ``(loss, logits)`` tuple given whole with ``has_aux=True``; a batch's logits), or another value is
                not a scalar.
        """
        if not self._inside:
            raise RuntimeError("LoopMonitor.step called outside its `with LoopMonitor(..) as loop:` block")
        _check("loss", loss, 1)
        for name, value in (("grad_norm", grad_norm), ("overflow", overflow), ("loss_scale", loss_scale),
                            ("lr", lr)):
            if value is not None:
                _check(name, value, 0)
        self._cb.cur_step_num += 1
        self._cb.net_outputs = (_host(loss), _host(overflow), _host(loss_scale), _host(lr), _host(grad_norm))
        self.monitor.on_train_step_end(self._run)
        return self.stopped

    @property
    def stopped(self) -> bool:
        """True once the monitor has stopped the run (``monitor.stop_reason`` says why)."""
        return self._run.get_stop_requested()


def _check(name: str, value, ndim: int) -> None:
    """``value`` is a number, or a tensor or array of at most ``ndim`` dimensions (scalars: of one element);
    else TypeError naming ``name``."""
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return
    shape = getattr(value, "shape", None)
    if shape is None:
        hint = (" (with value_and_grad(.., has_aux=True) the loss is the first item: (loss, aux), grads = "
                "grad_fn(..))" if isinstance(value, (tuple, list)) else "")
        raise TypeError(f"LoopMonitor.step: {name} must be a number or a tensor, got {type(value).__name__}{hint}")
    if len(shape) > ndim and int(np.prod(shape)) != 1:
        raise TypeError(f"LoopMonitor.step: {name} must be a scalar{' or per-device values' if ndim else ''}, got "
                        f"a tensor of shape {tuple(shape)}")


def _host(value):
    """A Python number as a NumPy scalar, which the step-output reader takes like a tensor; others as they are."""
    return np.asarray(value) if isinstance(value, (bool, int, float)) else value
