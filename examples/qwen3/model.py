"""Hugging Face transformers' own Qwen3 model, its decoder layers run by the tilec kernels of kernels.py.

`patch(model)` replaces the `forward` of each `Qwen3DecoderLayer` instance (`types.MethodType`) with
`tilec_decoder_forward`, which calls the tilec custom ops: RMSNorm, one QKV GEMM against the concatenated
q/k/v weights (concatenated once, here), per-head q/k RMSNorm + RoPE, the KV-cache write, causal grouped-query
attention (a prefill and a decode schedule), o_proj with the residual add fused, gate/up with SiLU fused,
down_proj with the residual add fused. Everything else is HF's: `Qwen3Model`'s loop over the layers, its
masks, its rotary embedding (the layer reads cos/sin from `position_embeddings`), the final norm and lm_head,
`generate`. The modules keep their class and parameters (state dicts load as before; after loading new
weights, call `patch` again: the concatenated QKV weight is a copy).

The KV cache. HF's model derives the positions of new tokens from `cache.get_seq_length()`, and its
attention calls `cache.update(k, v, layer_idx)`; so the least invasive cache is a `transformers.Cache` made
of our own layer class, `TilecCacheLayer` (a `DynamicLayer` subclass, so HF's masks and generate treat it as
a dynamic cache: no mask is built, the sizes come from its length): it preallocates [B, HKV, max_len, D]
buffers at the first update, writes the new keys and values with the tilec kv_cache_write kernel (in place,
at positions [past, past + S)), and returns views of the first past + S positions, which the attention
kernel reads directly (no copy, no concatenation). `tilec_cache(model, max_len)` makes one; pass it as
`cache=` to the model (or to generate). A patched layer also runs with HF's DynamicCache (its update
concatenates) or with no cache.

Masks: HF passes `attention_mask=None` for a causal batch without padding, and the kernels apply the
causal mask themselves (bottom-right aligned). A tensor mask is accepted only where it is exactly that
causal mask; any other (padding, a custom mask) raises a ValueError rather than being ignored. Sliding
windows, attention biases and activations other than SiLU are refused at patch time.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import torch
from transformers.cache_utils import Cache, DynamicLayer
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

import tilec as tc


def _load_sibling(module: str, filename: str):
    """Import this directory's `filename` as `module`, by path: the directory is not put on sys.path, where its
    kernels.py would shadow the `kernels` package that transformers imports."""
    if module not in sys.modules:
        spec = importlib.util.spec_from_file_location(module, Path(__file__).resolve().parent / filename)
        sys.modules[module] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[module])
    return sys.modules[module]


kernels = _load_sibling("qwen3_kernels", "kernels.py")

_TORCH_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


# -- the KV cache -----------------------------------------------------------------------------------------------

class TilecCacheLayer(DynamicLayer):
    """One layer's KV cache: preallocated [B, HKV, max_cache_len, D] buffers written by the tilec
    kv_cache_write op; `update` returns views of the positions written so far ([B, HKV, length, D])."""

    def __init__(self, max_cache_len: int):
        super().__init__()
        if not isinstance(max_cache_len, int) or max_cache_len < 1:
            raise ValueError(f"TilecCacheLayer: max_cache_len must be a positive int, got {max_cache_len!r}")
        self.max_cache_len = max_cache_len
        self.length = 0
        self.k_buffer = self.v_buffer = None
        self.position = None  # GraphDecoder's static step: the new token's position, an int64 tensor [1]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        B, HKV, _, D = key_states.shape
        self.device = key_states.device
        shape = (B, HKV, self.max_cache_len, D)
        self.k_buffer = torch.zeros(shape, dtype=key_states.dtype, device=self.device)
        self.v_buffer = torch.zeros(shape, dtype=value_states.dtype, device=self.device)
        self.write = kernels.op("kv_cache_write", _dtype_name(key_states.dtype))
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        for name, x, buf in (("keys", key_states, self.k_buffer), ("values", value_states, self.v_buffer)):
            if x.dim() != 4 or x.shape[:2] != buf.shape[:2] or x.shape[3] != buf.shape[3] or x.dtype != buf.dtype \
                    or x.device != buf.device:
                raise ValueError(f"TilecCacheLayer.update: new {name} {tuple(x.shape)} {x.dtype} on {x.device} do "
                                 f"not fit the cache {tuple(buf.shape)} {buf.dtype} on {buf.device} "
                                 f"([B, HKV, S, D]; make a new cache for another batch size)")
        S = key_states.shape[2]
        if self.length + S > self.max_cache_len:
            raise ValueError(f"TilecCacheLayer.update: {self.length} cached + {S} new tokens exceed the cache's "
                             f"max_len {self.max_cache_len}; make the cache with a larger max_len")
        start = torch.full((1,), self.length, dtype=torch.int64, device=self.device)
        self.write(key_states, value_states, start, self.k_buffer, self.v_buffer)
        self.length += S
        self.keys = self.k_buffer[:, :, :self.length]
        self.values = self.v_buffer[:, :, :self.length]
        return self.keys, self.values

    def update_static(self, key_states: torch.Tensor, value_states: torch.Tensor):
        """GraphDecoder's step: write the new token at `self.position` (a tensor, its value set before each
        step) and return the whole buffers [B, HKV, max_cache_len, D]: the same shapes and addresses at every
        step. The length is not advanced here (the step may be a graph's replay); GraphDecoder advances it."""
        self.write(key_states, value_states, self.position, self.k_buffer, self.v_buffer)
        return self.k_buffer, self.v_buffer

    def advance(self, tokens: int) -> None:
        """Count `tokens` more written (by update_static, out of Python's sight in a graph)."""
        self.length += tokens
        self.keys = self.k_buffer[:, :, :self.length]
        self.values = self.v_buffer[:, :, :self.length]

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return self.max_cache_len

    def reset(self) -> None:
        """Forget the cached tokens; the buffers stay allocated (the next update overwrites them)."""
        self.length = 0
        if self.is_initialized:
            self.keys = self.k_buffer[:, :, :0]
            self.values = self.v_buffer[:, :, :0]

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("TilecCacheLayer.crop: pass a negative number, the tokens to remove")
        self.length = max(self.length + tokens_to_remove, 0)
        if self.is_initialized:
            self.keys = self.k_buffer[:, :, :self.length]
            self.values = self.v_buffer[:, :, :self.length]

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError("TilecCacheLayer: beam search / batch reordering is not supported; use HF's "
                                  "DynamicCache (the patched layers run with it too)")

    reorder_cache = batch_repeat_interleave = batch_select_indices = _refuse


def tilec_cache(model, max_len: int) -> Cache:
    """A `transformers.Cache` of TilecCacheLayer, one per decoder layer of `model`, each holding up to
    `max_len` tokens (prompt and generated); its buffers are allocated at the first update, with the batch
    size, dtype and device of the keys. Pass it as `cache=` to the model or to generate."""
    n = len(_decoder_layers(model))
    if n == 0:
        raise ValueError("tilec_cache: the model has no Qwen3DecoderLayer")
    return Cache(layers=[TilecCacheLayer(max_len) for _ in range(n)])


# -- patching the decoder layers ---------------------------------------------------------------------------------

def _dtype_name(dtype: torch.dtype) -> str:
    if dtype not in _TORCH_DTYPES:
        raise ValueError(f"qwen3 tilec kernels: unsupported dtype {dtype}; use one of "
                         f"{', '.join(map(str, _TORCH_DTYPES))}")
    return _TORCH_DTYPES[dtype]


def _decoder_layers(model) -> list[Qwen3DecoderLayer]:
    return [m for m in model.modules() if isinstance(m, Qwen3DecoderLayer)]


def _check_supported(layer: Qwen3DecoderLayer) -> None:
    """Refuse, at patch time, what the kernels do not compute."""
    attn, mlp = layer.self_attn, layer.mlp
    if getattr(attn, "sliding_window", None) is not None:
        raise ValueError(f"patch: layer {attn.layer_idx} uses a sliding window ({attn.sliding_window}); the tilec "
                         f"attention is full causal attention only")
    for lin in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj):
        if lin.bias is not None:
            raise ValueError("patch: projections with a bias (attention_bias=True) are not supported")
    act = getattr(layer.mlp.config, "hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"patch: hidden_act {act!r}; the tilec MLP computes SiLU only")
    dtypes = {p.dtype for p in layer.parameters()}
    if len(dtypes) != 1:
        raise ValueError(f"patch: the layer's parameters mix dtypes {sorted(map(str, dtypes))}; cast the model first")
    _dtype_name(dtypes.pop())


def _prepare(layer: Qwen3DecoderLayer) -> types.SimpleNamespace:
    """What a patched forward needs: the ops for the layer's dtype and constants, the weights as the kernels
    read them (q/k/v concatenated once into one [(H + 2 HKV) D, C] weight)."""
    attn = layer.self_attn
    dtype = _dtype_name(attn.q_proj.weight.dtype)
    D = attn.head_dim
    H = attn.q_proj.out_features // D
    HKV = attn.k_proj.out_features // D
    if H * D != attn.q_proj.out_features or HKV * D != attn.k_proj.out_features or H % HKV:
        raise ValueError(f"patch: q_proj {attn.q_proj.out_features} / k_proj {attn.k_proj.out_features} outputs "
                         f"are not whole heads of {D}, or {H} query heads are not a multiple of {HKV} KV heads")
    if attn.q_norm.variance_epsilon != attn.k_norm.variance_epsilon:
        raise ValueError("patch: q_norm and k_norm have different eps; the qk_norm_rope kernel takes one")
    with torch.no_grad():
        w_qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight], dim=0).contiguous()
    return types.SimpleNamespace(
        dtype=dtype, H=H, HKV=HKV, D=D, G=H // HKV,
        w_qkv=w_qkv,
        input_norm=kernels.op("rmsnorm", dtype, eps=layer.input_layernorm.variance_epsilon),
        post_norm=kernels.op("rmsnorm", dtype, eps=layer.post_attention_layernorm.variance_epsilon),
        linear=kernels.op("linear", dtype),
        qk_norm_rope=kernels.op("qk_norm_rope", dtype, head_dim=D, eps=attn.q_norm.variance_epsilon),
        prefill=kernels.op("attention_prefill", dtype, head_dim=D, scale=attn.scaling),
        decode=kernels.op("attention_decode", dtype, head_dim=D, scale=attn.scaling),
        decode_static=kernels.op("attention_decode_static", dtype, head_dim=D, scale=attn.scaling),
        linear_residual=kernels.op("linear_residual", dtype),
        gate_up=kernels.op("gate_up_silu", dtype),
    )


def patch(model):
    """Run every Qwen3DecoderLayer of `model` (a Qwen3ForCausalLM or Qwen3Model) through the tilec ops;
    returns the model. Builds each kernel once (seconds of isl checks per kernel on first use)."""
    layers = _decoder_layers(model)
    if not layers:
        raise ValueError(f"patch: {type(model).__name__} has no Qwen3DecoderLayer")
    for layer in layers:
        _check_supported(layer)
    for layer in layers:
        layer._tilec = _prepare(layer)
        layer.forward = types.MethodType(tilec_decoder_forward, layer)
    return model


def _check_mask(attention_mask, S: int, T: int) -> None:
    """None (HF's causal case without padding) passes; a tensor mask passes only if it is the causal mask
    the kernels apply (query i attends keys 0 .. T - S + i); anything else raises."""
    if attention_mask is None:
        return
    if not isinstance(attention_mask, torch.Tensor):
        raise ValueError(f"tilec Qwen3 layer: unsupported attention_mask of type {type(attention_mask).__name__}")
    allowed = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
    qpos = torch.arange(T - S, T, device=allowed.device)[:, None]
    causal = torch.arange(T, device=allowed.device)[None, :] <= qpos
    if allowed.shape[-2:] != (S, T) or not torch.equal(allowed, causal.expand_as(allowed)):
        raise ValueError(f"tilec Qwen3 layer: attention_mask {tuple(attention_mask.shape)} is not the plain causal "
                         f"mask (padding or a custom mask); the tilec attention supports batches without padding "
                         f"only (attention_mask=None or all ones)")


def _static_layer(cache, layer_idx: int):
    """The layer's TilecCacheLayer when a GraphDecoder step is running (its `position` set), else None."""
    layers = getattr(cache, "layers", None)
    if layers is None or layer_idx >= len(layers):
        return None
    layer = layers[layer_idx]
    return layer if isinstance(layer, TilecCacheLayer) and layer.position is not None else None


def tilec_decoder_forward(self, hidden_states: torch.Tensor, attention_mask=None, position_ids=None, cache=None,
                          use_cache=False, position_embeddings=None, **kwargs) -> torch.Tensor:
    """Qwen3DecoderLayer.forward through the tilec ops (same arguments and result as HF's)."""
    if cache is None:
        cache = kwargs.pop("past_key_values", None)  # the v4 name, still accepted by HF
    t = self._tilec
    B, S, C = hidden_states.shape
    if _dtype_name(hidden_states.dtype) != t.dtype:
        raise ValueError(f"tilec Qwen3 layer: hidden states are {hidden_states.dtype}, the layer's weights {t.dtype}")
    if position_embeddings is None:
        raise ValueError("tilec Qwen3 layer: position_embeddings (cos, sin) must be given, as Qwen3Model does")
    layer_idx = self.self_attn.layer_idx
    static = _static_layer(cache, layer_idx)
    if static is not None:  # GraphDecoder's step: a Python value here would be baked into the graph
        if S != 1 or attention_mask is not None:
            raise ValueError(f"tilec Qwen3 layer: a static (CUDA-graph) step takes one new token and no mask "
                             f"(got {S} tokens, attention_mask {type(attention_mask).__name__}; HF's sdpa "
                             f"attention passes None)")
    else:
        past = cache.get_seq_length(layer_idx) if cache is not None else 0
        _check_mask(attention_mask, S, past + S)

    # attention block: RMSNorm, QKV GEMM, q/k norm + RoPE, cache, attention, o_proj + residual
    x = hidden_states.reshape(B * S, C)
    h = t.input_norm(x, self.input_layernorm.weight)
    qkv = t.linear(h, t.w_qkv).view(B, S, t.H + 2 * t.HKV, t.D)
    q, k = qkv[:, :, :t.H], qkv[:, :, t.H:t.H + t.HKV]          # strided views, read in place by the kernel
    v = qkv[:, :, t.H + t.HKV:].transpose(1, 2)                  # [B, HKV, S, D], a view
    cos, sin = (e.to(hidden_states.dtype).expand(B, S, t.D) for e in position_embeddings)
    q, k = t.qk_norm_rope(q, k, cos, sin, self.self_attn.q_norm.weight, self.self_attn.k_norm.weight)
    if static is not None:  # the whole cache, the position a tensor: the same shapes at every step
        k, v = static.update_static(k, v)                        # [B, HKV, max_len, D]
        o = t.decode_static(q.view(B, t.HKV, t.G, t.D), k, v, static.position)  # [B, HKV, G, D]
    else:
        if cache is not None:
            k, v = cache.update(k, v, layer_idx)                 # [B, HKV, past + S, D]
        attention = t.decode if S == 1 else t.prefill
        o = attention(q.view(B, S, t.HKV, t.G, t.D), k, v)       # [B, S, HKV, G, D] = [B, S, H * D]
    x = t.linear_residual(o.view(B * S, t.H * t.D), self.self_attn.o_proj.weight, x)

    # MLP block: RMSNorm, gate/up + SiLU, down_proj + residual
    h = t.post_norm(x, self.post_attention_layernorm.weight)
    a = t.gate_up(h, self.mlp.gate_proj.weight, self.mlp.up_proj.weight)
    x = t.linear_residual(a, self.mlp.down_proj.weight, x)
    return x.view(B, S, C)


# -- decode steps in a CUDA graph ---------------------------------------------------------------------------------

class GraphDecoder:
    """Greedy-decode steps of a patched model over a tilec cache, one token per sequence per step, captured once
    in a CUDA graph and replayed (on a CPU: the same step run eagerly, for checking).

        out = model(input_ids=prompt, cache=cache, use_cache=True)          # prefill: eager, any length
        step = GraphDecoder(model, cache)
        logits = step(next_ids)                                               # [B, 1, vocab], one per call

    A graph replays fixed shapes at fixed addresses; so in a step every tensor is either static (the weights,
    the cache's buffers, the step's own input ids and position [B, 1], copied into before each replay) or made
    inside the step. The decoder layers see the cache in its static mode (`TilecCacheLayer.position` set): the
    new keys and values are written at the position tensor, and attention runs over the whole buffers bounded
    by it (`attention_decode_static`). The model is called with `position_ids` given, so HF derives nothing
    from the cache's Python length, and with no mask (HF's sdpa attention passes None for one new token; an
    eager-attention model's mask tensor is refused). Python state advances outside the graph: after each step
    every layer's length grows by one.

    The first call on a GPU captures the step with `tc.graphed` (two warm-up calls on a side stream: Triton
    compiles, every op's first call; then the capture); each of those writes the same keys and values at the
    same position, so the cache ends as after one step. The logits returned are a copy (the graph's output
    buffer is overwritten by the next step).
    A GraphDecoder serves one cache (its buffers' addresses are in the graph): make a new one for another
    cache. tc.record counts each replay's calls (tc.graphed logs the calls its capture made)."""

    def __init__(self, model, cache: Cache, use_graph: bool | None = None):
        self.layers = list(getattr(cache, "layers", []))
        if not self.layers or not all(isinstance(x, TilecCacheLayer) for x in self.layers):
            raise ValueError("GraphDecoder: the cache must be a tilec_cache (every layer a TilecCacheLayer)")
        if not all(x.is_initialized for x in self.layers):
            raise ValueError("GraphDecoder: run the prefill through the cache first (its buffers are allocated at "
                             "the first update)")
        if len({x.length for x in self.layers}) != 1:
            raise ValueError(f"GraphDecoder: the cache's layers hold different lengths "
                             f"{sorted({x.length for x in self.layers})}")
        if not all(hasattr(x, "_tilec") for x in _decoder_layers(model)) or not _decoder_layers(model):
            raise ValueError("GraphDecoder: patch(model) first: its decoder layers must run the tilec ops")
        rope = {getattr(m, "rope_type", "default") for m in model.modules() if hasattr(m, "rope_type")}
        if rope - {"default", "linear"}:  # dynamic/longrope read the positions on the host and update state
            raise ValueError(f"GraphDecoder: RoPE type {sorted(rope)} recomputes its tables from the positions' "
                             f"values on the host, which a graph cannot replay; 'default' and 'linear' only")
        self.model, self.cache = model, cache
        first = self.layers[0]
        self.device = first.k_buffer.device
        self.batch = first.k_buffer.shape[0]
        self.use_graph = self.device.type == "cuda" if use_graph is None else use_graph
        if self.use_graph and self.device.type != "cuda":
            raise ValueError(f"GraphDecoder: CUDA graphs need a CUDA device; the cache is on {self.device}")
        self.graph = None  # a tc.graphed of _step, at the first call on a GPU

    @property
    def length(self) -> int:
        return self.layers[0].length

    def _step(self, ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """The step the graph captures: the model on the new tokens `ids` [B, 1] at `position_ids` [B, 1], the
        cache's layers in their static mode, written at and bounded by position_ids[0] (a view: no copy)."""
        for layer in self.layers:
            layer.position = position_ids[0]
        try:
            return self.model(input_ids=ids, position_ids=position_ids, cache=self.cache, use_cache=True).logits
        finally:
            for layer in self.layers:
                layer.position = None

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        """One decode step: `input_ids` [B, 1], the new token of each sequence; returns its logits [B, 1, V]."""
        if not isinstance(input_ids, torch.Tensor) or tuple(input_ids.shape) != (self.batch, 1):
            raise ValueError(f"GraphDecoder: input_ids must be a tensor [{self.batch}, 1] (one new token per "
                             f"sequence), got {getattr(input_ids, 'shape', type(input_ids).__name__)}")
        if len({x.length for x in self.layers}) != 1:
            raise ValueError("GraphDecoder: the cache's layers were changed outside the decoder (different lengths)")
        room = self.layers[0].max_cache_len
        if self.length + 1 > room:
            raise ValueError(f"GraphDecoder: the cache is full ({self.length} of max_len {room} tokens); make the "
                             f"cache with a larger max_len")
        position_ids = torch.full((self.batch, 1), self.length, dtype=torch.int64, device=self.device)
        ids = input_ids.to(device=self.device, dtype=torch.int64)
        if not self.use_graph:
            logits = self._step(ids, position_ids)
        elif self.graph is None:  # warm-up calls, then the capture (tilec's tc.graphed): each writes the same
            self.graph = tc.graphed(self._step, ids, position_ids, warmup=2)  # keys at the same position
            logits = self.graph.replay()
        else:
            logits = self.graph(ids, position_ids)  # copied into the graph's static inputs, replayed
        for layer in self.layers:
            layer.advance(1)
        return logits.clone()
