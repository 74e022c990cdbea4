"""A differential test of tilec against Halide: random pipelines and schedules applied in both.

- `gen.py` draws a pipeline of 2-4 stages over 2-D float32 inputs (pointwise maps, stencils on inputs
  made larger, broadcasts, transposes, sums over an axis, matmuls, float16/bfloat16 rounding points) and
  a schedule written once as a list of abstract steps; `canonical()` lists well-known Halide schedules.
- `halide_side.py` writes the pipeline as Halide Funcs, applies the steps and realizes it on the CPU.
- `tilec_side.py` writes it as tilec computes, applies the same steps and builds and runs it.
- `reference.py` evaluates the pipeline in float64 with its rounding points, with an error bound.
- `classify.py` runs a case in both, compares, and buckets the outcome; it also runs campaigns in
  worker processes (`scripts/halide_diff.py`, `tests/test_halide_diff.py`).
"""
