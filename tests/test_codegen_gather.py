"""Embedding lookups reduced by a row group are read from the table inside its kernel."""

from __future__ import annotations

import torch
from test_codegen_harness import DEVICE, candidate_module, check_equal, task_path

from kernelwright.codegen import generate

SHARED_LOOKUP = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(30, 16)

    def forward(self, ids):
        e = self.embedding(ids)
        return e.sum(dim=1), e


def get_inputs():
    return [torch.randint(0, 30, (4, 5))]


def get_init_inputs():
    return []
"""


SHIFTED_IDS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(40, 16)

    def forward(self, ids):
        return self.embedding(ids + 1).sum(dim=1)


def get_inputs():
    return [torch.randint(0, 39, (4, 5))]


def get_init_inputs():
    return []
"""


def test_the_bag_reads_the_table_and_the_lookup_is_not_materialised(tmp_path):
    result = generate(task_path("embedding_bag"))
    assert result.ok, result.reason
    assert result.groups == (
        "row (reduce dim(s) 1 of a rank-3 tensor): embedding -> sum",
        "row (reduce dim(s) 1 of a rank-3 tensor): embedding -> mean -> mul",
    )
    forward = result.source.split("def forward", 1)[1]
    assert "_sum(ids, self.embedding.weight)" in forward
    assert "_mean_mul(ids32, self.table)" in forward
    # Only the lookup returned as it is stays torch's.
    assert forward.count("self.embedding(") == 1 and "self.embedding(single)" in forward


def test_embedding_bags_match_the_model(tmp_path):
    shapes = [{}, {"batch_size": 2, "bag_size": 70, "num_embeddings": 90, "embedding_dim": 33}]
    # ROW_MAX_BLOCK 64 sends the longer bags through the multi-pass path.
    check_equal("embedding_bag", tmp_path, shapes, configs=({}, {"ROW_MAX_BLOCK": 64}))


def test_embedding_bags_in_bf16(tmp_path):
    check_equal("embedding_bag", tmp_path, [{}], dtype=torch.bfloat16)


def test_an_index_outside_the_table_reads_zeros_not_memory(tmp_path):
    module = candidate_module(generate(task_path("embedding_bag")).source, tmp_path)
    model = module.ModelNew(50, 40).to(DEVICE)
    ids = torch.tensor([[1, 2, -1, 50, 10_000, 3, 4]], device=DEVICE)
    ids32 = torch.randint(0, 25, (5, 5), dtype=torch.int32, device=DEVICE)
    single = torch.tensor([0], device=DEVICE)
    with torch.no_grad():
        bags, _, _ = model(ids, ids32, single)
        valid = model.embedding.weight[torch.tensor([1, 2, 3, 4], device=DEVICE)].sum(0)
    torch.testing.assert_close(bags[0], valid, atol=1e-5, rtol=1e-5)


def test_a_lookup_used_elsewhere_stays_torchs(tmp_path):
    path = tmp_path / "shared_lookup.py"
    path.write_text(SHARED_LOOKUP)
    result = generate(str(path))
    assert result.ok, result.reason
    forward = result.source.split("def forward", 1)[1]
    assert "embedding = self.embedding(ids)" in forward and "_sum(embedding)" in forward


def test_computed_ids_are_read_from_the_tensor_that_holds_them(tmp_path):
    path = tmp_path / "shifted_ids.py"
    path.write_text(SHIFTED_IDS)
    result = generate(str(path))
    assert result.ok, result.reason
    assert "v_sum = _sum(add, self.embedding.weight)" in result.source
    namespace: dict = {}
    exec(compile(SHIFTED_IDS, str(path), "exec"), namespace)
    ref = namespace["Model"]().to(DEVICE)
    new = candidate_module(result.source, tmp_path).ModelNew().to(DEVICE)
    new.load_state_dict(ref.state_dict())
    ids = torch.randint(0, 39, (4, 5), device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(new(ids), ref(ids), atol=1e-5, rtol=1e-5)
