"""Square roots by Heron's iteration, looping until converged: data-dependent control flow."""

# read B*N*4 bytes, write B*N*4 bytes (B = batch_size, N = dim): 1.07 GB per call;
# ~4 FLOP/element per iteration (divide, add, multiply, compare), ~10 iterations for inputs
# in [0.01, 100]: 5.4 GFLOP.
# H200 floor: 0.25 ms (1.07 GB at 4.25 TB/s; memory bound). Eager makes ~10 passes, each
# ending in a host sync on the convergence test. Not expected of the fusion codegen: the
# `if` on a tensor's value cannot be traced by torch.fx. A per-element loop in registers
# (iterate each element until it converges) gives the same values in one pass.
import torch
import torch.nn as nn

batch_size = 8192
dim = 16384
max_iterations = 32
tolerance = 1e-6


class Model(nn.Module):
    """y <- (y + x / y) / 2 from y = x, until every relative step is <= tolerance.

    Stops after max_iterations in any case (in bf16 the iterates can cycle between two values).

    Output shape: (batch_size, dim)
    """

    def __init__(self, max_iterations: int, tolerance: float):
        super().__init__()
        self.max_iterations = max_iterations
        self.tolerance = tolerance

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for _ in range(self.max_iterations):
            y_next = 0.5 * (y + x / y)
            converged = torch.all((y_next - y).abs() <= self.tolerance * y_next)
            y = y_next
            if converged:
                break
        return y


def get_inputs():
    return [torch.rand(batch_size, dim) * 100.0 + 0.01]


def get_init_inputs():
    return [max_iterations, tolerance]
