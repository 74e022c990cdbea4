"""tilec fuzz case, seed 197481165 (gemm): NaN in every sum (a dot operand computed in the kernel, -inf past the end of k); its CUDA form must compile (tests/test_regressions.py).

Run from the repository root: TRITON_INTERPRET=1 python this_file.py
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import tilec as tc  # noqa: E402
from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401

SIZES = {'M': 4, 'N': 1, 'K': 1}
M = SIZES['M']
N = SIZES['N']
K = SIZES['K']
A = tc.placeholder((K, M), 'float32', name='A')
W = tc.placeholder((K, N), 'bfloat16', name='W')
P = tc.compute((K, M), lambda i, j: tc.log(A[i, j]), name='P')
k = tc.reduce_axis(K, name='k')
C = tc.compute((M, N), lambda i, j: tc.sum(W[k, j] * P[k, i], axis=k, acc_dtype='float32'), name='C')
s = tc.create_schedule([C])
P_i, P_j = P.axis
C_i, C_j, C_k = C.axis + C.reduce_axis
C_io, C_ii = s[C].split(C_i, 16)
C_jo, C_ji = s[C].split(C_j, 32)
C_ko, C_ki = s[C].split(C_k, 32)
s[P].compute_at(s[C], C_ko)
config = {}
CASE = dict(sched=s, args=[A, W, C], config=config, sizes=SIZES,
            inputs={'A': {}, 'W': {}},
            seed=197481165, specialize=None)

if __name__ == "__main__":
    run_script_case(CASE)
