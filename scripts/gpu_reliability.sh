#!/usr/bin/env bash
# Run on the GPU host (../shared/notes/gpu.md): the reliability checks in compiled mode, results
# under $OUT: tensors past 2**31 elements (scripts/int64_check.py), the regression, golden and
# example tests, and the schedule fuzzer compiled on the device. Usage from the repo root there:
#   bash scripts/gpu_reliability.sh [FUZZ_SECONDS]      (FUZZ_SEED=N starts the campaign elsewhere)
set -uo pipefail
OUT=${OUT:-out}
FUZZ_SECONDS=${1:-200}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
export TRITON_INTERPRET=0 TILEC_FUZZ_SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
timeout 200 python3 scripts/int64_check.py > "$OUT/int64.txt" 2>&1; echo "int64_check exit $?" >> "$OUT/int64.txt"
tail -12 "$OUT/int64.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_regressions.py tests/test_golden.py \
  tests/test_examples.py > "$OUT/pytest.txt" 2>&1
tail -3 "$OUT/pytest.txt"
# the cases the H200 runs of 2026-12-01 found (wrong values, compiles of minutes), each replayed
for seed in 900441 911253 912013 901975 910273 911040 911677 912377 912481 912613; do
  echo "seed $seed: $(timeout 150 python3 scripts/fuzz.py --cases 1 --seed $seed --no-reduce --quiet --timeout 120 \
    | grep -E '^(refused|correct|wrong|internal|hung|crash):' | grep -v ': 0' | tr '\n' ' ')"
done | tee "$OUT/replay.txt"
timeout $((FUZZ_SECONDS + 90)) python3 scripts/fuzz.py --cases 100000 --seed ${FUZZ_SEED:-920000} --jobs 8 --timeout 120 \
  --time-budget "$FUZZ_SECONDS" --save-failures "$OUT/fuzz-failures" > "$OUT/fuzz.txt" 2>&1
grep -E "^(cases|refused|correct|wrong|internal|hung|crash)" "$OUT/fuzz.txt"
grep -E "^seed" "$OUT/fuzz.txt" | head -20
