import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Every activation the codegen knows, chained, in their module, functional, torch and
    method spellings, with in-place variants; the result is one pointwise kernel."""

    def __init__(self):
        super().__init__()
        self.act = nn.Sequential(
            nn.LeakyReLU(0.2), nn.GELU(approximate="tanh"), nn.Hardtanh(-2.0, 2.0)
        )
        self.relu = nn.ReLU(inplace=True)
        self.softplus = nn.Softplus(beta=2.0, threshold=5.0)

    def forward(self, x):
        y = self.act(x)
        y = F.silu(y) + F.mish(y) - F.selu(y) * F.elu(y, alpha=0.5)
        y = F.hardsigmoid(y) + F.hardswish(y) + self.softplus(y) + F.softsign(y)
        z = torch.abs(y).sqrt() + torch.exp(-y).log1p() + torch.rsqrt(y * y + 1.0)
        z = z + torch.log(torch.abs(y) + 0.5) - y.pow(3) * 0.1 + torch.pow(y, 0.5).nan_to_num(0.0)
        z = self.relu(z) + F.gelu(y) + torch.sigmoid(y) * torch.tanh(y)
        z.add_(y.clamp(min=-0.5, max=0.75))
        return z


batch_size = 4
dim = 50


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
