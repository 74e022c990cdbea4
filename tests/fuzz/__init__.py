"""A differential schedule fuzzer for tilec.

- `gen.py`: a seeded generator of (compute, schedule, config) cases, each also a standalone script;
- `oracle.py`: the reference (float64 PyTorch with tilec's rounding points, an error bound per element),
  the inputs, the sentinel-guarded outputs, and the comparison;
- `run.py`: runs cases in worker processes with a timeout, classifies them, and reduces failures.

`scripts/fuzz.py` is the command line; `tests/test_fuzz.py` the CI test.
"""
