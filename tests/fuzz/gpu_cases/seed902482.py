"""tilec fuzz case, seed 902482 (random).

Run from the repository root: TRITON_INTERPRET=1 python this_file.py
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import tilec as tc  # noqa: E402
from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401

SIZES = {'M': 39, 'N': 33, 'K': 16}
M = SIZES['M']
N = SIZES['N']
K = SIZES['K']
X = tc.placeholder((N, K), 'float32', name='X')
U = tc.placeholder((M, N), 'bfloat16', name='U')
V = tc.placeholder((N, K), 'bfloat16', name='V')
k = tc.reduce_axis(N, name='k')
C = tc.compute((K,), lambda i: tc.min((X[k, i] + V[k, i]), axis=k), name='C')
k1 = tc.reduce_axis(K, name='k1')
D = tc.compute((N,), lambda i: tc.sum((X[i, k1] % 2.0), axis=k1), name='D', dtype='float16')
k2 = tc.reduce_axis(K, name='k2')
E = tc.compute((N,), lambda i: tc.sum(((X[1, k2] > 0.0) | X[i // 2, K - 1].ne(X[i // 2, K - 1])), axis=k2), name='E', dtype='int32')
s = tc.create_schedule([C, D, E])
C_i, C_k = C.axis + C.reduce_axis
D_i, D_k1 = D.axis + D.reduce_axis
E_i, E_k2 = E.axis + E.reduce_axis
E_io, E_ii = s[E].split(E_i, 4)
E_k2o, E_k2i = s[E].split(E_k2, 16)
s[E].reorder(E_io, E_k2o, E_ii, E_k2i)
s[E].reorder(E_ii, E_io, E_k2o)
config = {}
CASE = dict(sched=s, args=[V, X, C, D, E], config=config, sizes=SIZES,
            inputs={'X': {'shift': 4.0, 'grid': 1}, 'V': {'layout': 's', 'special': 0.02, 'kinds': [0.0, 'inf'], 'grid': 4}},
            seed=902482, specialize=None)

if __name__ == "__main__":
    run_script_case(CASE)

