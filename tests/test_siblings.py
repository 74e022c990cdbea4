"""Outputs that do not read each other in one kernel (issue 25, item 4): a stage placed (compute_at) in the
loops of a stage it neither reads nor is read by, their axes corresponding through a tensor both read
(`Schedule.common_source`, `placement._sibling_axes`); and the kernels' launch order derived through
inlined stages. Compared with PyTorch at sizes that divide no tile, size-1 dims, NaN and Inf."""

from __future__ import annotations

import pytest
import torch

import tilec as tc


def _cross_entropy():
    M, V = tc.size_vars("M V")
    X = tc.placeholder((M, V), "float32", name="X")
    y = tc.placeholder((M,), "int32", name="y")
    c, c2 = tc.reduce_axis(V, name="c"), tc.reduce_axis(V, name="c2")
    m = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="m")
    se = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - m[r]), axis=c2), name="se")
    lse = tc.compute((M,), lambda r: m[r] + tc.log(se[r]), name="lse")
    loss = tc.compute((M,), lambda r: lse[r] - X[r, y[r]], name="loss")
    dX = tc.compute((M, V), lambda r, v: tc.exp(X[r, v] - lse[r]) - tc.where(v == y[r], 1.0, 0.0), name="dX")
    return X, y, m, se, lse, loss, dX


def _check_ce(kernel, rows, vocab, special=False):
    x = torch.randn(rows, vocab)
    y = torch.randint(0, vocab, (rows,), dtype=torch.int32)
    if special and rows > 2:
        x[1, 0], x[2, -1] = float("nan"), float("inf")
    loss, dx = kernel(x, y)
    m = x.max(1).values  # the compute's formula (torch.logsumexp differs where a row holds +inf)
    lse = m + torch.log(torch.exp(x - m[:, None]).sum(1))
    torch.testing.assert_close(loss, lse - x[torch.arange(rows), y.long()], equal_nan=True)
    want = torch.exp(x - lse[:, None]) - torch.nn.functional.one_hot(y.long(), vocab).float()
    torch.testing.assert_close(dx, want, equal_nan=True)


@pytest.mark.parametrize("block", [16, 64])
def test_loss_placed_at_its_gradients_row(block):
    X, y, m, se, lse, loss, dX = _cross_entropy()
    s = tc.create_schedule([loss, dX])
    r, v = dX.axis
    s[dX].split(v, block)
    s[dX].bind(r, "program_id.0")
    s[lse].compute_inline()
    for st, ax in ((m, m.reduce_axis[0]), (se, se.reduce_axis[0])):
        s[st].split(ax, block)
        s[st].compute_at(s[dX], r)
    s[loss].compute_at(s[dX], r)
    prog = tc.lower(s)
    assert len(prog.kernels) == 1 and "loss[r] = loss_val" in str(prog)
    kernel = tc.build(s, [X, y, loss, dX])
    for rows, vocab in [(7, 33), (1, 1), (5, 130)]:
        _check_ce(kernel, rows, vocab)
    _check_ce(kernel, 6, 40, special=True)


def test_kernel_order_follows_reads_through_inlined_stages():
    """loss and dX read m and se through the inlined lse. With m placed in dX's kernel and se a kernel of its
    own (reading m), dX's kernel needs se's and se's needs dX's: a cycle, said so. The launch order took only
    direct reads between kernels, ran loss's kernel first and refused that order as 'loss reads se before
    its reduction is complete' (regression test, issue 25). Placing se in dX's kernel too builds."""
    X, y, m, se, lse, loss, dX = _cross_entropy()
    s = tc.create_schedule([loss, dX])
    r, v = dX.axis
    s[dX].split(v, 32)
    s[dX].bind(r, "program_id.0")
    s[lse].compute_inline()
    s[m].split(m.reduce_axis[0], 32)
    with pytest.raises(tc.LoweringError, match=r"the placements make two kernels need each other's results "
                                               r"\(dX_kernel -> se_kernel -> dX_kernel"):
        s[m].compute_at(s[dX], r)
        tc.lower(s)
    s[se].split(se.reduce_axis[0], 32)
    s[se].compute_at(s[dX], r)
    names = [k.name for k in tc.lower(s).kernels]
    assert names == ["dX_kernel", "loss_kernel"]  # loss reads se (in dX's kernel) through lse: after it
    _check_ce(tc.build(s, [X, y, loss, dX]), 9, 70)


def test_stages_that_read_nothing_in_common_stay_apart():
    M = tc.size_vars("M")
    A = tc.placeholder((M,), "float32", name="A")
    B = tc.placeholder((M,), "float32", name="B")
    P = tc.compute((M,), lambda i: A[i] * 2.0, name="P")
    Q = tc.compute((M,), lambda i: B[i] + 1.0, name="Q")
    s = tc.create_schedule([P, Q])
    with pytest.raises(tc.ArgumentError, match=r"compute_at: Q neither reads nor is read by P .*and the two read "
                                               r"no tensor in common"):
        s[Q].compute_at(s[P], P.axis[0])


def test_siblings_that_read_their_source_at_shifted_positions_are_refused():
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    S = tc.compute((M,), lambda i: X[i] * 2.0, name="S")
    A = tc.compute((M,), lambda i: S[i] * 3.0, name="A")
    B = tc.compute((M - 1,), lambda i: S[i + 1] + 1.0, name="B")
    s = tc.create_schedule([A, B])
    io, ii = s[A].split(A.axis[0], 16)
    s[A].bind(io, "program_id.0")
    s[B].compute_at(s[A], io)  # not lowerable: left to build
    with pytest.raises(tc.LoweringError, match=r"compute_at\(B, A\): the two share loops through S, which both read, "
                                               r"but B reads S only at shifted or computed positions; sharing loops "
                                               r"needs plain accesses like S\[i\]"):
        tc.lower(s)
