"""Stand-in for PNA's ``models/layers.py``: a fully connected layer and a stack of them."""

import torch.nn as nn

_ACTIVATIONS = {"relu": nn.ReLU, "leakyrelu": nn.LeakyReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "none": nn.Identity}


def _activation(name):
    return _ACTIVATIONS[(name or "none").lower()]()


class FCLayer(nn.Module):
    """``activation(Linear(x))``."""

    def __init__(self, in_size, out_size, activation="relu", dropout=0.0, b_norm=False, bias=True):
        super().__init__()
        self.linear = nn.Linear(in_size, out_size, bias=bias)
        self.activation = _activation(activation)

    def forward(self, x):
        return self.activation(self.linear(x))


class MLP(nn.Module):
    """``layers`` FCLayers: in -> hidden ... -> out, ``mid_activation`` between, ``last_activation`` last."""

    def __init__(
        self,
        in_size,
        hidden_size,
        out_size,
        layers,
        mid_activation="relu",
        last_activation="none",
        dropout=0.0,
        mid_b_norm=False,
        last_b_norm=False,
    ):
        super().__init__()
        sizes = [in_size] + [hidden_size] * (layers - 1) + [out_size]
        self.fully_connected = nn.ModuleList(
            FCLayer(a, b, mid_activation if i < layers - 1 else last_activation)
            for i, (a, b) in enumerate(zip(sizes, sizes[1:]))
        )

    def forward(self, x):
        for layer in self.fully_connected:
            x = layer(x)
        return x
