"""A tiny decoder-only language model and a byte-level text dataset, for the demo and the tests.

The model is a standard pre-LayerNorm GPT block stack (Radford et al. 2019, section 2.3):
token + position embeddings, ``num_layers`` blocks of causal multi-head self-attention and a GELU
MLP, a final LayerNorm and an untied output head. Tokens are UTF-8 bytes (vocabulary 256), so no
tokenizer file is needed.
"""
from __future__ import annotations

import math

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import Parameter, Tensor, nn, ops

VOCAB_SIZE = 256


def builtin_corpus() -> bytes:
    """English text shipped with CPython itself: the Python documentation topics (~465 kB)."""
    import pydoc_data.topics as topics

    return "".join(topics.topics[k] for k in sorted(topics.topics)).encode("utf-8")


def load_corpus(path: str | None = None) -> bytes:
    """Bytes of ``path``, or of :func:`builtin_corpus` when ``path`` is None.

    Raises:
        ValueError: the text is shorter than 1 kB.
    """
    data = builtin_corpus() if path is None else open(path, "rb").read()
    if len(data) < 1024:
        raise ValueError(f"{path}: need at least 1 kB of text, got {len(data)} bytes")
    return data


class Block(nn.Cell):
    """One pre-LN transformer block. Input and output: float32 ``[batch, seq, hidden]``."""

    def __init__(self, hidden: int, heads: int, seq_len: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.ln1 = nn.LayerNorm((hidden,))
        self.ln2 = nn.LayerNorm((hidden,))
        self.qkv = nn.Dense(hidden, 3 * hidden)
        self.proj = nn.Dense(hidden, hidden)
        self.fc1 = nn.Dense(hidden, 4 * hidden)
        self.fc2 = nn.Dense(4 * hidden, hidden)
        self.gelu = nn.GELU()
        mask = np.triu(np.full((seq_len, seq_len), -1e9, np.float32), k=1)
        self.mask = Tensor(mask)
        self.scale = 1.0 / math.sqrt(self.head_dim)

    def construct(self, x):
        b, s, h = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, self.head_dim)
        qkv = qkv.transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = ops.matmul(q, k.transpose(0, 1, 3, 2)) * self.scale + self.mask[:s, :s]
        att = ops.softmax(att, axis=-1)
        y = ops.matmul(att, v).transpose(0, 2, 1, 3).reshape(b, s, h)
        x = x + self.proj(y)
        return x + self.fc2(self.gelu(self.fc1(self.ln2(x))))


class TinyLM(nn.Cell):
    """Decoder-only LM returning the mean next-token cross-entropy (nats), a float32 scalar.

    Inputs: ``input_ids`` int32 ``[batch, seq+1]`` and ``loss_mask`` float32 ``[batch, seq]``
    (1 for tokens that count). The mask is part of the batch as in MindFormers' pretraining data, so a
    poisoned batch (a non-finite mask entry) really makes the loss and the gradients non-finite.
    """

    def __init__(self, seq_len: int = 64, hidden: int = 64, layers: int = 2, heads: int = 4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, hidden)
        self.pos = Parameter(Tensor(np.random.default_rng(0).normal(0, 0.02, (1, seq_len, hidden)), ms.float32),
                             name="pos_embedding")
        self.blocks = nn.CellList([Block(hidden, heads, seq_len) for _ in range(layers)])
        self.ln_f = nn.LayerNorm((hidden,))
        self.head = nn.Dense(hidden, VOCAB_SIZE)
        self.ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="none")

    def construct(self, input_ids, loss_mask):
        tokens, labels = input_ids[:, :-1], input_ids[:, 1:]
        x = self.embed(tokens) + self.pos
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        b, s, v = logits.shape
        loss = self.ce(logits.reshape(b * s, v), labels.reshape(b * s)).reshape(b, s)
        return (loss * loss_mask).sum() / loss_mask.sum()


class ByteWindows:
    """Random-access source of ``(input_ids, loss_mask)`` windows over a byte corpus.

    Batch ``i`` is always the same windows (seeded by ``seed`` and ``i``), so a run is reproducible and
    a batch can be skipped or poisoned by index. ``poison`` holds batch indices whose loss mask gets a
    NaN (a corrupted sample, as a bad shard produces).
    """

    def __init__(self, corpus: bytes, seq_len: int, batch_size: int, num_batches: int, seed: int = 0):
        self.data = np.frombuffer(corpus, dtype=np.uint8)
        self.seq_len, self.batch_size, self.num_batches, self.seed = seq_len, batch_size, num_batches, seed
        self.poison: set[int] = set()

    def __len__(self) -> int:
        return self.num_batches

    def __getitem__(self, i: int):
        rng = np.random.default_rng((self.seed, i))
        starts = rng.integers(0, len(self.data) - self.seq_len - 1, self.batch_size)
        ids = np.stack([self.data[s:s + self.seq_len + 1] for s in starts]).astype(np.int32)
        mask = np.ones((self.batch_size, self.seq_len), np.float32)
        if i in self.poison:
            mask[0, 0] = np.nan
        return ids, mask


def make_dataset(source: ByteWindows) -> ds.GeneratorDataset:
    """A MindSpore dataset of single batches (already batched by ``source``), in order."""
    return ds.GeneratorDataset(source, column_names=["input_ids", "loss_mask"], shuffle=False)
