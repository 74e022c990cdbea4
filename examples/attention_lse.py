"""FlashAttention with its log-sum-exp, two outputs of one kernel (examples/attention.py, `lse=True`):

    LSE[z, h, i] = m[z, h, i] + log(l[z, h, i])

O and LSE do not read each other; both read the row statistics m and l, which O's key loop computes
(online). LSE is placed at O's query tile (compute_at through the tensors both read): it runs after the
loop, on the final statistics, and is stored beside O. One launch, as FlashAttention's forward pass
returns O and LSE for the backward pass.
"""

import attention
import common
import torch

SIZES = [dict(Z=1, H=2, M=100, N=100), dict(Z=1, H=1, M=1, N=1), dict(Z=2, H=1, M=37, N=37)]


def make():
    return attention.make(lse=True)


def inputs(sizes, device):
    return attention.inputs(sizes, device)


def reference(q, k, v):
    qf, kf = q.double(), k.double()
    s = qf @ kf.transpose(-1, -2) * q.shape[-1] ** -0.5
    m, n = q.shape[2], k.shape[2]
    s = s.masked_fill(torch.ones(m, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return attention.reference(q, k, v), torch.logsumexp(s, -1).float()


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
