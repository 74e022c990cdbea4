"""tilec fuzz case, seed 900441 (gemm).

Run from the repository root: TRITON_INTERPRET=1 python this_file.py
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import tilec as tc  # noqa: E402
from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401

SIZES = {'M': 36, 'N': 6, 'K': 16}
M, N, K = tc.size_vars('M N K')
tc.assume(K % 16 == 0)
A = tc.placeholder((M, K), 'float32', name='A')
W = tc.placeholder((K, N), 'float32', name='W')
k = tc.reduce_axis(K, name='k')
C = tc.compute((M, N), lambda i, j: tc.sum(W[k, j] * A[i, k], axis=k, acc_dtype='float32'), name='C')
s = tc.create_schedule([C])
C_i, C_j, C_k = C.axis + C.reduce_axis
C_jo, C_ji = s[C].split(C_j, tc.knob('BA', [64, 32]))
C_ko, C_ki = s[C].split(C_k, 8)
s[C].reorder(C_i, C_jo, C_ko, C_ji, C_ki)
s[C].bind(C_jo, 'program_id.0')
s[C].pipeline(C_ko, stages=tc.knob('BB', [1]))
C_io, C_ii = s[C].split(C_i, 32)
s[C].reorder(C_io, C_jo, C_ji, C_ko, C_ki, C_ii)
attempt(lambda: s[C].bind(C_io, 'program_id.0'))
s[C].compute_root()
C_kio, C_kii = s[C].split(C_ki, tc.knob('BB', [1]))
config = {'BA': 64, 'BB': 1}
CASE = dict(sched=s, args=[A, W, C], config=config, sizes=SIZES,
            inputs={'A': {'layout': 's', 'shift': -4.0}, 'W': {'shift': -4.0, 'grid': 16}},
            seed=900441, specialize=None)

if __name__ == "__main__":
    run_script_case(CASE)

