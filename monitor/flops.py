"""Model FLOPs per token and MFU.

Formula (PaLM, Chowdhery et al. 2022, appendix B): training FLOPs per token of a dense decoder are
``6 * N + 12 * L * H * S`` with ``N`` the non-embedding parameters, ``L`` layers, ``H`` hidden size and
``S`` sequence length. ``6 N`` is the forward (2 N) and backward (4 N) matrix multiplications against
the weights; ``12 L H S`` is the attention score and value products (``QK^T`` and ``AV``: 2 x 2 H S per
layer forward, x3 with backward).

Choices, stated once here:

* **N from a config** counts, per layer, the Q/O projections (``2 H^2``), the K/V projections with grouped
  query attention (``2 H * kv_heads * H / heads``: GQA shrinks only K and V), and the MLP (``3 H F`` for
  SwiGLU's gate, up and down matrices, ``2 H F`` for a plain MLP); plus the output head ``H V`` (a matmul
  on every token, tied or not). Input embeddings are lookups and are excluded; norms and biases are
  negligible and excluded.
* **Causal mask**: the attention term is counted in full (PaLM's convention, so MFU compares across
  implementations); ``causal=True`` halves it, as Megatron-LM's ``num_floating_point_operations`` does
  since its flash-attention change. Recomputation is never counted (that would be HFU, not MFU).
* An explicit parameter count with no ``layers``/``seq_len`` gives ``6 N`` alone.

MFU = FLOPs per token x tokens per second / (devices x peak FLOP/s of one device).
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelFlops:
    """Model dimensions for the FLOPs count; ``n_params`` (non-embedding) overrides the count from dims.

    Attributes: layers ``L``, hidden ``H``, seq_len ``S``, vocab ``V``, ffn_hidden ``F``, heads,
    kv_heads (GQA; defaults to heads), swiglu (3 MLP matrices instead of 2), causal (halve attention).
    """

    n_params: float | None = None
    layers: int = 0
    hidden: int = 0
    seq_len: int = 0
    vocab: int = 0
    ffn_hidden: int | None = None
    heads: int = 1
    kv_heads: int | None = None
    swiglu: bool = True
    causal: bool = False

    def parameters(self) -> float:
        """Non-embedding parameters N (output head included), from ``n_params`` or the dims."""
        if self.n_params is not None:
            return float(self.n_params)
        h, f = self.hidden, self.ffn_hidden if self.ffn_hidden is not None else 4 * self.hidden
        kv = self.kv_heads or self.heads
        attention = 2 * h * h + 2 * h * (kv * h // self.heads)
        mlp = (3 if self.swiglu else 2) * h * f
        return float(self.layers * (attention + mlp) + h * self.vocab)

    def per_token(self) -> float:
        """Training FLOPs per token: ``6 N + 12 L H S`` (halved attention term when ``causal``)."""
        attention = 12.0 * self.layers * self.hidden * self.seq_len
        return 6.0 * self.parameters() + (attention / 2 if self.causal else attention)

    @classmethod
    def from_mindformers(cls, model_config: dict, causal: bool = False) -> ModelFlops:
        """From a MindFormers ``model.model_config`` mapping (Llama-style keys).

        Uses ``num_layers``, ``hidden_size``, ``seq_length``, ``vocab_size``, ``num_heads``, ``n_kv_heads``
        (or ``num_key_value_heads``), and ``intermediate_size`` or Llama's rule from ``multiple_of`` and
        ``ffn_dim_multiplier`` (Touvron et al. 2023: ``F = multiple_of * ceil(m * 8H/3 / multiple_of)``).

        Raises:
            KeyError: a required key is missing (the message names it).
        """
        c = model_config
        try:
            h = int(c["hidden_size"])
            layers, seq = int(c["num_layers"]), int(c["seq_length"])
            vocab, heads = int(c["vocab_size"]), int(c["num_heads"])
        except KeyError as exc:
            raise KeyError(f"model_config lacks {exc.args[0]!r} (needed for the FLOPs count)") from None
        kv = c.get("n_kv_heads") or c.get("num_key_value_heads") or heads
        ffn = c.get("intermediate_size") or c.get("ffn_hidden_size")
        if not ffn:
            ffn = int(2 * 4 * h / 3)
            if c.get("ffn_dim_multiplier"):
                ffn = int(float(c["ffn_dim_multiplier"]) * ffn)
            mult = int(c.get("multiple_of", 256))
            ffn = mult * math.ceil(ffn / mult)
        return cls(layers=layers, hidden=h, seq_len=seq, vocab=vocab, ffn_hidden=int(ffn), heads=heads,
                   kv_heads=int(kv), swiglu=True, causal=causal)


def mfu(flops_per_token: float, tokens_per_second: float, devices: int, peak_flops: float) -> float:
    """Model FLOPs utilisation in 0..1: ``flops_per_token * TPS / (devices * peak_flops)`` (FLOP/s)."""
    return flops_per_token * tokens_per_second / (devices * peak_flops)
