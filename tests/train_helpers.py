"""A small real MindSpore training run on CPU, parameterised for the tests."""
import mindspore as ms
import mindspore.dataset as ds
from mindspore import nn
from mindspore.train import Callback, Model

from training_monitor.callbacks import SkippableSource
from training_monitor.callbacks.tinylm import ByteWindows, TinyLM, load_corpus, make_dataset

SEQ, BATCH = 16, 4
CORPUS = load_corpus()


def tiny_net():
    return TinyLM(seq_len=SEQ, hidden=32, layers=1, heads=2)


class Served(ByteWindows):
    """ByteWindows that remembers which batch indices it handed out, in order."""

    def __init__(self, *args):
        super().__init__(*args)
        self.served = []

    def __getitem__(self, i):
        self.served.append(i)
        return super().__getitem__(i)


class Rows:
    """The rows of ``batches`` (a :class:`Served`) one by one, a sample per item: ``served`` lists the row indices
    read (row ``i`` is row ``i % BATCH`` of batch ``i // BATCH``)."""

    def __init__(self, batches):
        self.batches, self.served = batches, []

    def __len__(self):
        return len(self.batches) * BATCH

    def __getitem__(self, i):
        self.served.append(i)
        ids, mask = self.batches[i // BATCH]
        return ids[i % BATCH], mask[i % BATCH]


def train(callbacks, steps=60, poison=(), cell=None, lr=0.05, seed=0, skippable=False, rows=False):
    """Train ``steps`` steps of plain SGD (fixed LR, a Parameter) with ``nn.TrainOneStepCell`` unless
    ``cell(net, opt)`` builds another step cell. With ``skippable`` the batches come through a
    :class:`SkippableSource` (``source.served`` lists the batch indices read); with ``rows`` too, the source
    yields samples (:class:`Rows`, returned as ``source``) and the pipeline batches them (``.batch(BATCH)``).
    Returns ``(net, opt, source)``."""
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    ms.set_seed(seed)
    net = tiny_net()
    source = Served(CORPUS, SEQ, BATCH, steps, seed)
    source.poison = set(poison)
    opt = nn.SGD(net.trainable_params(), learning_rate=lr)
    step_cell = cell(net, opt) if cell else nn.TrainOneStepCell(net, opt)
    if rows:
        source = Rows(source)
    data = make_dataset(source) if not skippable else ds.GeneratorDataset(
        SkippableSource(source), column_names=["input_ids", "loss_mask"], shuffle=False, python_multiprocessing=False)
    if rows:
        data = data.batch(BATCH)
    Model(step_cell).train(1, data, callbacks=callbacks, dataset_sink_mode=False)
    return net, opt, source


def loaded(path):
    """A ``cell`` for :func:`train`: the train-step cell with the checkpoint ``path`` loaded, as a resumed job builds
    it."""
    def build(net, opt):
        step_cell = nn.TrainOneStepCell(net, opt)
        ms.load_param_into_net(step_cell, ms.load_checkpoint(path))
        return step_cell
    return build


class AtStep(Callback):
    """Calls ``fn(cb_params)`` at the end of every step (after the callbacks listed before it)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def on_train_step_end(self, run_context):
        self.fn(run_context.original_args())
