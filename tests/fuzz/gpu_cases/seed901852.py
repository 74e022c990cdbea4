"""tilec fuzz case, seed 901852 (reduce).

Run from the repository root: TRITON_INTERPRET=1 python this_file.py
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import tilec as tc  # noqa: E402
from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401

SIZES = {'M': 16, 'N': 24}
M, N = tc.size_vars('M N')
tc.assume(N % 8 == 0)
X = tc.placeholder((M, N), 'float32', name='X')
k = tc.reduce_axis(N, name='k')
R = tc.compute((M,), lambda i: tc.sum(tc.where(X[i - 1, k].ne(X[i - 1, k]), X[i, k], X[i, k]), axis=k, acc_dtype='float32'), name='R', dtype='float32')
Y = tc.compute((M, N), lambda i, j: (tc.where(R[i].ne(R[i]), R[i].eq(0.0), (X[i, j] >= R[i])) * 2.0), name='Y', dtype='bfloat16')
Z = tc.compute((M, N), lambda i, j: (Y[i, j] + R[i]), name='Z')
s = tc.create_schedule([Z])
R_i, R_k = R.axis + R.reduce_axis
Y_i, Y_j = Y.axis
Z_i, Z_j = Z.axis
Z_io, Z_ii = s[Z].split(Z_i, 32)
Z_jo, Z_ji = s[Z].split(Z_j, 16)
s[Z].reorder(Z_io, Z_jo, Z_ii, Z_ji)
Z_io_jo = s[Z].fuse(Z_io, Z_jo)
s[Z].bind(Z_io_jo, 'program_id.0')
s[Y].compute_inline()
R_ko, R_ki = s[R].split(R_k, 8)
s[R].compute_at(s[Z], Z_io_jo)
attempt(lambda: s[Z].compute_inline())
Y_jo, Y_ji = s[Y].split(Y_j, 12)
attempt(lambda: s[R].fuse(R_ki, R_i))
config = {}
CASE = dict(sched=s, args=[X, Z], config=config, sizes=SIZES,
            inputs={'X': {'layout': 't'}},
            seed=901852, specialize={'N': SIZES['N']})

if __name__ == "__main__":
    run_script_case(CASE)

