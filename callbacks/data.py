"""A data source the monitor can tell to skip batches (the ``skip_batches`` action)."""
from __future__ import annotations

import threading


class SkippableSource:
    """Iterate a random-access source (``len(source)``, ``source[i]``) in order, and let the monitor skip
    items ahead of the reader.

    Use it as the source of a ``mindspore.dataset.GeneratorDataset`` with ``shuffle=False`` and
    ``python_multiprocessing=False`` (the monitor must reach this very object; a worker process would
    hold a copy). :class:`training_monitor.callbacks.TrainingMonitor` finds it in the training dataset's pipeline by
    itself.

    :meth:`skip` acts on the source's read position. MindSpore's pipeline prefetches, so the items
    already read (a few batches, the prefetch depth) are still trained on; the skipped item indices are
    recorded exactly in :attr:`skipped`. When the source yields whole batches (as ``TinyLM``'s does), an
    item is a batch; with ``.batch(B)`` later in the pipeline the monitor skips ``n * B`` items for ``n``
    batches (:func:`find_skippable` reads ``B`` from the pipeline).
    MindSpore requires an epoch to yield exactly ``len(source)`` items, so after a skip of ``n`` the
    epoch ends with the first ``n`` items of the source again, as the next epoch would begin.

    Args:
        source: anything with ``__len__`` and ``__getitem__`` (0-based).
    """

    def __init__(self, source):
        self.source = source
        self.position = 0  # index of the next item to read
        self.skipped: list[tuple[int, int]] = []  # (first, last) item indices skipped, inclusive
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.source)

    def __iter__(self):
        with self._lock:
            self.position = 0
        for _ in range(len(self.source)):
            with self._lock:
                i = self.position
                self.position += 1
            yield self.source[i % len(self.source)]

    def skip(self, n: int) -> tuple[int, int] | None:
        """Skip the next ``n`` items not yet read; return the (first, last) read positions skipped (item
        ``position % len(source)``), or None for ``n <= 0``."""
        if n <= 0:
            return None
        with self._lock:
            first = self.position
            self.position += n
        self.skipped.append((first, first + n - 1))
        return first, first + n - 1


def find_skippable(dataset) -> tuple[SkippableSource, int] | None:
    """The :class:`SkippableSource` feeding ``dataset`` (a MindSpore dataset pipeline) and how many of its items
    one batch of the pipeline holds: the product of the ``.batch(B)`` sizes between them (1 when the source
    yields whole batches; a batch size computed per batch counts as 1), or None."""
    stack = [(dataset, 1)]
    while stack:
        node, items = stack.pop()
        if isinstance(getattr(node, "source", None), SkippableSource):
            return node.source, items
        size = getattr(node, "batch_size", None)
        items *= size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 1
        stack.extend((child, items) for child in getattr(node, "children", None) or ())
    return None
