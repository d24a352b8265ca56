"""Rank-consistent inputs: every rank feeds the engine the same numbers, so every rank decides the same."""
from __future__ import annotations

import math

import numpy as np
from mindspore import Tensor, ops
from mindspore.communication.management import GlobalComm

from training_monitor.detectors import DETECTORS

# record fields each rank measures for itself (its step time, data wait, callbacks, throughput, MFU): the rules
# reading them judge that rank alone, whatever the consensus makes of the rest
RANK_OWN_FIELDS = frozenset(("step_time_s", "data_wait_s", "callbacks_s", "tokens", "samples", "mfu"))


def rank_own_rules() -> frozenset[str]:
    """The rules that judge a rank's own measurements (:data:`RANK_OWN_FIELDS`), whose events differ by rank."""
    return frozenset(rule for rule, cls in DETECTORS.items() if RANK_OWN_FIELDS.intersection(cls.reads))


def communication_ready() -> bool:
    """True when MindSpore's communication is initialised (``mindspore.communication.init()``): a collective
    before it ends the process (a segmentation fault on CPU)."""
    return bool(GlobalComm.INITED)


class RankConsensus:
    """One small ``AllReduce`` (sum over the world group) per step of ``[loss, grad_norm, overflow, ...]``.

    The engine then sees the mean loss and grad norm over the ranks and an overflow if any rank had one: a
    NaN on one rank is a NaN on every rank at the same step, so every rank rolls back to the same
    checkpoint at the same step. Cost: one collective of 5 floats per step (a host-device round trip);
    ``consensus: false`` turns it off. Needs MindSpore's communication initialised (``msrun`` +
    ``init()``).
    """

    def __init__(self, world_size: int):
        self.world_size = world_size
        self._sum = ops.AllReduce()

    def step_values(self, loss, grad_norm, overflow, check: bool = False):
        """The step's ``(loss, grad_norm, overflow, check)`` over the ranks: the mean loss and grad norm, an
        overflow if any rank had one, and ``check`` true if it is on any rank (a collective every rank must
        enter when one does: the weights check before a promotion, whatever each rank's ledger says)."""
        v = np.array([0.0 if loss is None else loss, 0.0 if grad_norm is None else grad_norm,
                      1.0 if overflow else 0.0, 1.0 if grad_norm is not None else 0.0, 1.0 if check else 0.0],
                     np.float32)
        total = self._sum(Tensor(v)).asnumpy()
        n = self.world_size
        norm = float(total[1]) / n if total[3] > 0 or not math.isfinite(total[1]) else None
        return (None if loss is None else float(total[0]) / n, norm,
                None if overflow is None else bool(total[2] > 0), bool(total[4] > 0))

    def all_ok(self, ok: bool) -> bool:
        """True when ``ok`` is true on every rank."""
        return int(self._sum(Tensor(np.array([1.0 if ok else 0.0], np.float32))).asnumpy()[0]) == self.world_size

    def first_rank(self, value: int, rank: int) -> int:
        """Rank 0's ``value``, a count under 2**48 (sent as three 16-bit parts, which a float32 sum of one
        non-zero term keeps exactly; MindSpore's AllReduce on CPU only sums)."""
        return self._gather(value if rank == 0 else 0, 0)[0]

    def least(self, value: int, rank: int) -> int:
        """The least of the ranks' ``value``, each a count under 2**48."""
        return min(self._gather(value, rank))

    def _gather(self, value: int, rank: int) -> list[int]:
        """Every rank's ``value`` (a count under 2**48), by rank: each rank fills its own three 16-bit parts of a
        vector of 3 x world size floats, zeros elsewhere, and the sum over the ranks keeps every part exactly."""
        parts = np.zeros(3 * self.world_size, np.float32)
        parts[3 * rank:3 * rank + 3] = [(value >> shift) & 0xFFFF for shift in (32, 16, 0)]
        got = self._sum(Tensor(parts)).asnumpy().reshape(-1, 3)
        return [sum(int(round(float(x))) << shift for x, shift in zip(row, (32, 16, 0))) for row in got]
