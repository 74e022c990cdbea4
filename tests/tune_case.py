"""A tiny schedule to tune in tests (also run as a worker process by test_tune.py)."""

from __future__ import annotations

import sys
import time

import torch

import tilec as tc


def make():
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float32", name="A")
    W = tc.placeholder((K, N), "float32", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
    s = tc.create_schedule(C)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [16, 32]), tc.knob("BN", [16, 32]))
    ko, ki = s[C].split(k, tc.knob("BK", [16, 32]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[C].num_warps(tc.knob("warps", [4, 8]))
    return s, [A, W, C]


def reference(a, w):
    return a @ w


MIX = tc.ShapeMix([({"M": 16}, 3), ({"M": 40}, 1)], fixed={"K": 24, "N": 20})


def slow_timer(kernel, inputs):
    time.sleep(0.3)
    return 1e-3 * kernel.config["BM"] / 16


def run(storage: str, trials: int, worker: bool, study: str) -> None:
    s, args = make()
    tc.tune(s, MIX, trials=trials, args=args, reference=reference, storage=storage, worker=worker,
            study_name=study, timer=slow_timer, heartbeat=1)


if __name__ == "__main__":
    torch.manual_seed(0)
    run(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "worker", sys.argv[4])
