"""Seeded dropout: Y = X / (1 - p) where a uniform draw at the element's flat offset exceeds p, else 0.

    keep[r, c] = rand(seed, r * N + c) > p
    Y[r, c]    = where(keep, X[r, c] / (1 - p), 0)

No mask is stored: the seed (an int64 input of one element, so a new seed is no new kernel) and the offset
give the same draw in any schedule and in the backward, as the tutorial's low-memory dropout does.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Triton tutorial 04, python/tutorials/04-low-memory-dropout.py: _seeded_dropout (tl.rand(seed, offsets) "
            "> p, x / (1 - p))")
P = 0.3
SIZES = [dict(M=37, N=45), dict(M=1, N=1), dict(M=3, N=1000)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    seed = tc.placeholder((1,), "int64", name="seed")
    Y = tc.compute((M, N), lambda r, c: tc.where(tc.rand(seed[0], r * N + c) > P, X[r, c] / (1 - P), 0.0), name="Y")
    s = tc.create_schedule(Y)
    if fast:
        r, c = Y.axis
        rc = s[Y].fuse(r, c)  # one flat range of elements, as the tutorial's offsets
        o, _ = s[Y].split(rc, tc.knob("BLOCK", [1024, 2048]))
        s[Y].bind(o, "program_id.0")
    return s, [X, seed, Y]


def inputs(sizes, device):
    return [harness.randn((sizes["M"], sizes["N"]), torch.float32, device),
            torch.randint(0, 2**40, (1,), dtype=torch.int64, device=device)]


def reference(x, seed):
    M, N = x.shape
    keep = harness.philox(int(seed.item()), torch.arange(M * N).view(M, N)).to(x.device) > P
    return torch.where(keep, x / (1 - P), torch.zeros((), device=x.device))


# The benchmark's (benchmarks/suite.py): its sizes on the GPU and what a PyTorch user runs (Triton's tutorial
# kernel is not a package to import: no `original`).
BENCH = dict(M=8192, N=8192)
SAME_DRAWS = False  # torch_ref draws its own mask from PyTorch's generator, so it keeps other elements: the
# benchmark checks what no draw changes (where both keep an element they agree, and the shares kept agree)


def torch_ref(x, seed):
    """F.dropout(x, P, training=True), float32 (PyTorch's generator: the seed input is not read)."""
    return torch.nn.functional.dropout(x, P, training=True)
