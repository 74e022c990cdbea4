"""tilec's suite of real kernels: each written as a user would, after a kernel people actually run (Triton's
tutorials, Liger-Kernel, llm.c, vLLM, Halide's apps, TVM's tutorials, FlashAttention), with a default and a
fast schedule, checked against PyTorch (`harness.py` says what each module defines and how it is checked;
tests/test_suite.py runs them all).

`NAMES`: the kernels that tilec writes. `REFUSED`: kernels it cannot write yet, each a module whose
`make(fast)` raises the `TilecError` that says why (`REASON` is a part of that message); when the language
grows to write one, it moves to NAMES.
"""

NAMES = [
    "layer_norm",
    "rms_norm",
    "softmax",
    "cross_entropy",
    "rope",
    "swiglu",
    "geglu",
    "matmul_leaky_relu",
    "int4_gemm",
    "fp8_rowscale_gemm",
    "conv2d",
    "flash_attention",
    "gqa_decode_attention",
    "paged_decode_attention",
    "embedding_encoder",
    "fused_add_rms_norm",
    "group_norm",
    "gelu_tanh",
    "kl_div",
    "layer_norm_backward_dx",
    "harris",
    "batched_matmul",
    "softmax_backward",
    "dropout",
    "gelu_exact",
    "softplus",
    "alibi_softmax",
    "halide_blur_u16",
    "silu_and_mul",
    "llmc_permute_qkv",
    "selective_scan",
    "topk_routing",
    "histogram",
    "kv_cache_write",
    "varlen_decode_attention",
    "cumsum",
    "padded_vocab_softmax",
    "moe_scatter",
]

REFUSED: list[str] = []
