"""Pointwise chains fused into one kernel, including as the epilogue of torch's conv."""

from __future__ import annotations

from pathlib import Path

import torch
from test_codegen_harness import check_equal


def test_conv_epilogue_bias_relu_scale(tmp_path):
    src = check_equal(
        "conv_bias_relu",
        tmp_path,
        [{}, {"batch_size": 3, "out_channels": 5, "height": 9, "width": 9}],
    )
    # CONV_IMPL's default: torch's conv, one pointwise kernel for the whole epilogue.
    assert src.count("_epilogue_kernel[grid](") == 1
    assert "F.conv2d(" in src


def test_every_activation_in_one_kernel(tmp_path):
    src = check_equal("activations", tmp_path, [{}, {"batch_size": 3, "dim": 37}])
    assert src.count("_kernel[grid](") == 1


def test_broadcast_scalars_where_two_outputs(tmp_path):
    src = check_equal(
        "broadcast_where", tmp_path, [{}, {"batch_size": 2, "channels": 5, "length": 9}]
    )
    assert src.count("_kernel[grid](") == 1


def test_non_contiguous_input(tmp_path):
    """A transposed input: the launcher reads it through .contiguous(), results unchanged."""

    def transposed(inputs):
        x = inputs[0]
        return [x.transpose(0, 1).contiguous().transpose(0, 1), *inputs[1:]]

    check_equal("broadcast_where", tmp_path, [{}], inputs_hook=transposed)


def test_fp16_chain(tmp_path):
    check_equal("conv_bias_relu", tmp_path, [{}], dtype=torch.float16)


def test_transposed_input_beside_broadcast_operands_is_walked_in_memory_order(tmp_path):
    """level2/13's pattern: a transposed input times a per-column parameter. The kernel reads the
    input in memory order (no transposing copy) and the output keeps its layout, as eager's
    does; a row-major input of the same task still takes the row-major path."""
    from test_codegen_harness import DEVICE, candidate_module

    from kernelwright.codegen import generate

    bench = Path(__file__).parent.parent / "benchmarks" / "level2"
    result = generate(str(bench / "13_transposed_input_silu_scale.py"))
    assert result.source is not None, result.reason
    assert "PERMUTED=permuted" in result.source
    module = candidate_module(result.source, tmp_path)
    torch.manual_seed(0)
    model = module.ModelNew(48).to(DEVICE)
    for x in (torch.randn(48, 40, device=DEVICE).t(), torch.randn(40, 48, device=DEVICE)):
        with torch.no_grad():
            out = model(x)
            ref = torch.nn.functional.silu(x) * model.scale
        assert out.stride() == x.stride()
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
