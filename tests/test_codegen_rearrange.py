"""codegen/rearrange.py: einops' rearrange written as reshape and permute, against einops."""

from __future__ import annotations

import einops
import pytest
import torch

from kernelwright.codegen.rearrange import PatternError, proxy_rearrange

CASES = [
    ("b (c l) ... -> b c l ...", {"l": 4}),
    ("b c l h -> b h c l", {}),
    ("b (c l) h p -> b c l h p", {"c": 3}),
    ("b c l h -> b (c l) h", {}),
    ("a b c d -> (a b) 1 (c d)", {}),
    ("... d -> d ...", {}),
    ("a b c d -> a b c d ()", {}),
    ("a b c d -> a b c d", {}),
]


@pytest.mark.parametrize("pattern,lengths", CASES)
def test_the_same_tensor_as_einops(pattern, lengths):
    x = torch.randn(2, 12, 3, 5)
    want = einops.rearrange(x, pattern, **lengths)
    got = proxy_rearrange(x, pattern, lengths, x.dim())
    assert got.shape == want.shape and torch.equal(got, want)


@pytest.mark.parametrize(
    "pattern,lengths,why",
    [
        ("a b -> a b", {}, "names 2 dimensions of 4"),
        ("a (b c) d e -> a b c d e", {}, "all but one length"),
        ("(a (b)) c d e -> a b c d e", {}, "nested"),
        ("a b c d -> a b c", {}, "same axes"),
        ("a b c d -> a b c d", {"z": 2}, "does not name"),
        ("a b c d", {}, "one '->'"),
    ],
)
def test_a_pattern_it_does_not_write_is_refused_with_the_reason(pattern, lengths, why):
    with pytest.raises(PatternError, match=why):
        proxy_rearrange(torch.randn(2, 12, 3, 5), pattern, lengths, 4)
