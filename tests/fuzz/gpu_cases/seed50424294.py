"""tilec fuzz case, seed 50424294 (reduce): split_k (a workspace tensor among the kernel parameters, which scripts/fuzz_compile.py typed from the schedule's tensors only: KeyError 'R_part'); its CUDA form must compile (tests/test_regressions.py).

Run from the repository root: TRITON_INTERPRET=1 python this_file.py
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import tilec as tc  # noqa: E402
from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401

SIZES = {'M': 1, 'N': 12}
M = SIZES['M']
N = SIZES['N']
X = tc.placeholder((M, N), 'float16', name='X')
k = tc.reduce_axis(M, name='k')
R = tc.compute((N,), lambda i: tc.sum((X[k, i] + X[k, i]), axis=k, acc_dtype='float32'), name='R', dtype='bfloat16')
s = tc.create_schedule([R])
R_i, R_k = R.axis + R.reduce_axis
R_io, R_ii = s[R].split(R_i, 64)
R_ko, R_ki = s[R].split(R_k, 64)
s[R].reorder(R_io, R_ko, R_ii, R_ki)
s[R].bind(R_io, 'program_id.0')
s[R].split_k(R_ko, 1)
s[R].num_warps(1)
config = {}
CASE = dict(sched=s, args=[X, R], config=config, sizes=SIZES,
            inputs={'X': {'scale': 10.0}},
            seed=50424294, specialize=None)

if __name__ == "__main__":
    run_script_case(CASE)

