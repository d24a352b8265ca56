"""FLOPs per token, MFU and the peak table."""
import pytest

from training_monitor.flops import ModelFlops, mfu
from training_monitor.hardware import PEAKS, normalise, peak_flops


@pytest.mark.parametrize("tps, expected", [(1500, 19.7), (2500, 32.8), (3500, 45.9), (4500, 59.1)])
def test_seed_mfu_table(tps, expected):
    # 7B parameters, peak 320 TFLOP/s per device: 6 * 7e9 * 1500 = 63 TFLOP/s = 19.7 %
    f = ModelFlops(n_params=7e9).per_token()
    assert round(100 * mfu(f, tps, devices=1, peak_flops=320e12), 1) == expected


def test_dense_formula_with_attention_term():
    # N = 1e9 given, L=24, H=2048, S=4096: 6e9 + 12*24*2048*4096
    f = ModelFlops(n_params=1e9, layers=24, hidden=2048, seq_len=4096)
    assert f.per_token() == 6e9 + 12 * 24 * 2048 * 4096
    assert ModelFlops(n_params=1e9, layers=24, hidden=2048, seq_len=4096, causal=True).per_token() == \
        6e9 + 6 * 24 * 2048 * 4096


def test_parameter_count_gqa_swiglu_by_hand():
    # one layer, H=8, heads=4, kv_heads=2 (head dim 2): Q,O = 2*64; K,V = 2*8*4 = 64; SwiGLU F=16: 3*8*16
    m = ModelFlops(layers=1, hidden=8, seq_len=10, vocab=100, ffn_hidden=16, heads=4, kv_heads=2)
    assert m.parameters() == 128 + 64 + 384 + 8 * 100
    plain = ModelFlops(layers=1, hidden=8, seq_len=10, vocab=100, ffn_hidden=16, heads=4, swiglu=False)
    assert plain.parameters() == 128 + 128 + 256 + 800
    assert m.per_token() == 6 * (128 + 64 + 384 + 800) + 12 * 1 * 8 * 10


def test_llama2_7b_from_mindformers_config():
    cfg = {"num_layers": 32, "hidden_size": 4096, "seq_length": 4096, "vocab_size": 32000, "num_heads": 32,
           "multiple_of": 256}
    m = ModelFlops.from_mindformers(cfg)
    assert m.ffn_hidden == 11008  # Llama 2 7B
    # 32 * (4 * 4096^2 + 3 * 4096 * 11008) + 4096 * 32000 = 6.607e9 (7B minus the input embedding)
    assert m.parameters() == 32 * (4 * 4096 ** 2 + 3 * 4096 * 11008) + 4096 * 32000
    with pytest.raises(KeyError, match="hidden_size"):
        ModelFlops.from_mindformers({"num_layers": 2})


def test_peak_table_has_sources_and_unknown_device_gives_none(log_lines, monkeypatch):
    monkeypatch.delenv("MONITOR_PEAK_TFLOPS", raising=False)
    for name in ("Ascend910A", "Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910C",
                 "A100", "H100-SXM", "H100-PCIE", "H200"):
        assert PEAKS[name].source and PEAKS[name].confidence in ("official", "derived", "estimate")
    assert normalise("Ascend910B2C") == "Ascend910B2" and normalise("NVIDIA H100 80GB HBM3") == "H100-SXM"
    assert peak_flops("Ascend910B3") == 295e12
    assert peak_flops("TPUv9") is None
    assert sum("no peak FLOP/s known for device 'TPUv9'" in line for line in log_lines) == 1
    monkeypatch.setenv("MONITOR_PEAK_TFLOPS", "100")
    assert peak_flops("TPUv9") == 100e12
