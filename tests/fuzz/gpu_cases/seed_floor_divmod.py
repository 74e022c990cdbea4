"""tilec case (not a fuzz seed: a newcomer's walk-through): float // and % start from C's fmod, which the
GPU form takes from libdevice; libdevice's fmod takes two float32 or two float64 tensors, never a Python
number or mixed types, so every operand is made a tensor of one type first; its CUDA form must compile
(tests/test_regressions.py).

Run from the repository root: TRITON_INTERPRET=1 python this_file.py
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import tilec as tc  # noqa: E402
from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401

SIZES = {'M': 5, 'N': 7}
M = SIZES['M']
N = SIZES['N']
X = tc.placeholder((M, N), 'float32', name='X')
D = tc.placeholder((M, N), 'float64', name='D')
I = tc.placeholder((M, N), 'int32', name='I')
H = tc.placeholder((M, N), 'float16', name='H')
Y = tc.compute((M, N), lambda i, j: X[i, j] // 0.1 + X[i, j] % 2 + X[i, j] // D[i, j] + D[i, j] % 0.3
               + I[i, j] // 0.5 + (I[i, j] % X[i, j]) + H[i, j] // H[i, j] + X[i, j] % float("inf"), name='Y')
s = tc.create_schedule([Y])
config = {}
CASE = dict(sched=s, args=[X, D, I, H, Y], config=config, sizes=SIZES,
            inputs={'X': {}, 'D': {}, 'I': {}, 'H': {}},
            seed=0, specialize=None)

if __name__ == "__main__":
    run_script_case(CASE)
