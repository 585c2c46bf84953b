"""Stand-in for CompGCN's ``utils``: circular correlation over the last dimension."""

import torch


def ccorr(a, b):
    """``irfft(conj(rfft(a)) * rfft(b))``: the circular correlation of ``a`` and ``b``."""
    n = a.shape[-1]
    return torch.fft.irfft(torch.conj(torch.fft.rfft(a, dim=-1)) * torch.fft.rfft(b, dim=-1), n=n, dim=-1)
