"""tilec fuzz case, seed 910628 (random).

Run from the repository root: TRITON_INTERPRET=1 python this_file.py
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import tilec as tc  # noqa: E402
from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401

SIZES = {'M': 17, 'N': 4}
M = SIZES['M']
N = SIZES['N']
X = tc.placeholder((N,), 'float16', name='X')
U = tc.placeholder((N, M), 'float32', name='U')
C = tc.compute((N, M), lambda i, j: U[i, j].eq(0.0), name='C')
D = tc.compute((N, M), lambda i, j: (100.0 / 3.0), name='D', dtype='float16')
k = tc.reduce_axis(N, name='k')
E = tc.compute((M,), lambda i: tc.max((~((~(D[k, i] > 0.0)).astype('float32') < tc.sigmoid(D[k, i]))), axis=k), name='E', dtype='int32')
s = tc.create_schedule([D, C, E])
C_i, C_j = C.axis
D_i, D_j = D.axis
E_i, E_k = E.axis + E.reduce_axis
E_local = s.cache_write(E, 'local')
D_jo, D_ji = s[D].split(D_j, 16)
s[D].bind(D_jo, 'program_id.0')
config = {}
CASE = dict(sched=s, args=[U, D, C, E], config=config, sizes=SIZES,
            inputs={'U': {'scale': 300.0, 'grid': 4}},
            seed=910628, specialize=None)

if __name__ == "__main__":
    run_script_case(CASE)

