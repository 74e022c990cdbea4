#!/usr/bin/env bash
# Run on the GPU host (see ../shared/notes/gpu.md): the whole test suite and every example in
# compiled mode (no interpreter), results under $OUT. Usage from the repo root on that host:
#   bash scripts/gpu_check.sh
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
unset TRITON_INTERPRET
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests "$@" 2>&1 | tee "$OUT/pytest.txt" | tail -40
for f in examples/[a-z]*.py; do
  [ "$(basename "$f")" = common.py ] && continue
  echo "== $f" >> "$OUT/examples.txt"
  (cd examples && timeout 300 python3 "$(basename "$f")") >> "$OUT/examples.txt" 2>&1 || echo "FAILED $f" >> "$OUT/examples.txt"
  tail -1 "$OUT/examples.txt"
done
