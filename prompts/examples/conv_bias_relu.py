"""Conv2d left to torch; its epilogue (conv bias + extra bias + ReLU) fused in one Triton kernel."""

# Conv: 2*N*C_out*C_in*KH*KW*OH*OW FLOPs, done by torch (cuDNN). Epilogue on the N x C_out x OH x
# OW output: read and write each element once (8 bytes in fp32) plus 2*C_out biases. Eager torch
# makes three passes (conv bias, + bias, relu); fusing leaves one read and one write.
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Elements of one (n, c) plane per program: 1024 = 8 fp32 per thread at 4 warps, two 16-byte
# loads each, which saturates HBM; smaller planes shrink the block to the plane size.
MAX_BLOCK_SIZE = 1024  # tune: 256, 512, 1024, 2048
NUM_WARPS = 4  # tune: 2, 4, 8


@triton.jit
def _bias_relu_kernel(
    y_ptr, conv_bias_ptr, bias_ptr, plane_size, n_channels, BLOCK_SIZE: tl.constexpr
):
    # Grid axis 0 walks the N*C planes of the NCHW output, axis 1 the blocks inside a plane, so
    # the channel (and both biases) is one scalar per program: no per-element division.
    plane = tl.program_id(0)
    channel = plane % n_channels
    b = tl.load(conv_bias_ptr + channel).to(tl.float32) + tl.load(bias_ptr + channel).to(tl.float32)
    offs = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < plane_size
    # int64 plane offset: N*C*H*W can pass 2**31 elements on large activations.
    ptrs = y_ptr + plane.to(tl.int64) * plane_size + offs
    y = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(y + b, 0.0)
    tl.store(ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


def bias_relu_(y: torch.Tensor, conv_bias: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """relu(y + conv_bias[c] + bias[c]) written into `y` (N, C, H, W contiguous), returned."""
    n_batch, n_channels, height, width = y.shape
    plane_size = height * width
    if y.numel() == 0:
        return y
    block_size = min(triton.next_power_of_2(plane_size), MAX_BLOCK_SIZE)
    grid = (n_batch * n_channels, triton.cdiv(plane_size, block_size))
    _bias_relu_kernel[grid](
        y,
        conv_bias.contiguous(),
        bias.contiguous(),
        plane_size,
        n_channels,
        BLOCK_SIZE=block_size,
        num_warps=NUM_WARPS,
    )
    return y


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = self.conv
        # The conv without its bias: the bias joins the fused epilogue instead of its own pass.
        y = torch.nn.functional.conv2d(
            x, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups
        )
        # cuDNN may return channels_last for channels_last inputs; the kernel indexes NCHW.
        # y is this call's own temporary, so the epilogue may overwrite it in place.
        return bias_relu_(y.contiguous(), conv.bias, self.bias.reshape(-1))
