"""nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d as CV nodes (kernel_conv.py's implicit GEMM), and
nn.MaxPool1d/2d/3d and nn.AvgPool1d/2d/3d as CV nodes too (kernel_pool.py: a window over the
input per output element, the same spatial geometry and the same pointwise epilogue).

The node's arguments are the input, the weight and the bias (None without one), then the
module's geometry (stride, padding, dilation, groups, and output_padding for a transposed
convolution) as Python values read from the module at run time (`self.conv.stride`): a task
that passes them to its constructor gets a candidate right for any value of them.
"""

from __future__ import annotations

import torch.fx as fx
from torch import nn

from .ir import CV, SCALAR, Node
from .normalize_builder import GraphBuilder

# The module attributes a convolution reads, in the order its CV node holds them.
GEOMETRY = ("stride", "padding", "dilation", "groups")
TRANSPOSED_GEOMETRY = (*GEOMETRY, "output_padding")
# And a pooling's, read from the module at run time the same way.
MAX_POOL_GEOMETRY = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
AVG_POOL_GEOMETRY = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")
POOLS = {
    nn.MaxPool1d: ("maxpool", 1),
    nn.MaxPool2d: ("maxpool", 2),
    nn.MaxPool3d: ("maxpool", 3),
    nn.AvgPool1d: ("avgpool", 1),
    nn.AvgPool2d: ("avgpool", 2),
    nn.AvgPool3d: ("avgpool", 3),
}


class ConvOps(GraphBuilder):
    """The convolution modules, each a CV node (or None: left to torch)."""

    def conv_module(
        self, n: fx.Node, mod: nn.Module, path: str, args: tuple, kwargs: dict
    ) -> Node | None:
        """`path`: the module as ModelNew's forward reads it (self.conv)."""
        x = args[0] if args else None
        if len(args) != 1 or kwargs or not isinstance(x, Node) or not x.is_float:
            return None  # ConvTranspose's output_size argument, or not a float tensor
        rank = len(mod.kernel_size)
        if mod.padding_mode != "zeros" or isinstance(mod.padding, str):
            return None  # reflect/replicate/circular padding, padding="same": cuDNN's
        if x.shape is None or len(x.shape) != rank + 2:
            return None  # an unbatched input
        weight = self.param(f"{n.target}.weight")
        bias = self.param(f"{n.target}.bias") if mod.bias is not None else None
        if weight is None or (mod.bias is not None and bias is None):
            return None
        transposed = isinstance(mod, nn.modules.conv._ConvTransposeNd)
        geometry = []
        for name in TRANSPOSED_GEOMETRY if transposed else GEOMETRY:
            node = self.make(SCALAR, "python", f"{n.target}_{name}", (), None, None)
            node.attrs.update(expr=f"{path}.{name}", value=getattr(mod, name))
            geometry.append(node)
        return self.make(
            CV,
            "conv",
            n.name,
            (x, weight, bias, *geometry),
            self.shape_of(n),
            self.dtype_of(n),
            rank=rank,
            transposed=transposed,
        )

    def pool_module(
        self, n: fx.Node, mod: nn.Module, path: str, args: tuple, kwargs: dict
    ) -> Node | None:
        """A max or average pooling module as a CV node of op "maxpool"/"avgpool" (or None:
        left to torch): the input, then the module's geometry as values read at run time."""
        op, rank = POOLS[type(mod)]
        x = args[0] if args else None
        if len(args) != 1 or kwargs or not isinstance(x, Node) or not x.is_float:
            return None
        if x.shape is None or len(x.shape) != rank + 2:
            return None  # an unbatched input
        if op == "maxpool" and mod.return_indices:
            return None  # (values, indices): torch's
        if op == "avgpool" and getattr(mod, "divisor_override", None) is not None:
            return None
        geometry = []
        for name in MAX_POOL_GEOMETRY if op == "maxpool" else AVG_POOL_GEOMETRY:
            node = self.make(SCALAR, "python", f"{n.target}_{name}", (), None, None)
            node.attrs.update(expr=f"{path}.{name}", value=getattr(mod, name))
            geometry.append(node)
        return self.make(
            CV, op, n.name, (x, *geometry), self.shape_of(n), self.dtype_of(n), rank=rank
        )
