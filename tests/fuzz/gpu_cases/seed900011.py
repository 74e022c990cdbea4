"""tilec fuzz case, seed 900011 (reduce).

Run from the repository root: TRITON_INTERPRET=1 python this_file.py
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import tilec as tc  # noqa: E402
from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401

SIZES = {'M': 16, 'N': 16}
M, N = tc.size_vars('M N')
X = tc.placeholder((M, N), 'float32', name='X')
k = tc.reduce_axis(M, name='k')
R = tc.compute((N,), lambda i: tc.min(((X[k, i].ne(X[k, i]) | (X[k, i] > 0.0)) * 2.0), axis=k, acc_dtype='float16'), name='R', dtype='float32')
s = tc.create_schedule([R])
R_i, R_k = R.axis + R.reduce_axis
R_io, R_ii = s[R].split(R_i, 8)
R_ko, R_ki = s[R].split(R_k, 64)
s[R].reorder(R_io, R_ko, R_ii, R_ki)
s[R].bind(R_io, 'program_id.0')
R_koo, R_koi = s[R].split(R_ko, 64)
attempt(lambda: s[R].reorder(R_io, R_ii, R_koo, R_ki, R_koi))
attempt(lambda: s[R].fuse(R_koi, R_ii))
attempt(lambda: s[R].compute_inline())
attempt(lambda: s[R].tile(R_koo, R_io, 2, 4))
attempt(lambda: s[R].unroll(R_io))
config = {}
CASE = dict(sched=s, args=[X, R], config=config, sizes=SIZES,
            inputs={'X': {'shift': -4.0}},
            seed=900011, specialize=None)

if __name__ == "__main__":
    run_script_case(CASE)

