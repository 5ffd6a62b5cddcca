"""Embedding lookup of bags of ids, summed per bag: a gather then a reduction."""

# read V*E*4 bytes of table (V, E = num_embeddings, embedding_dim; each row is gathered
# ~B*L/V = 4 times on average, counted once), B*L*8 of int64 ids, write B*E*4 bytes
# (B, L = batch_size, bag_size): 0.579 GB per call; 1 FLOP per gathered element: 0.54 GFLOP.
# H200 floor: 0.14 ms (0.579 GB at 4.25 TB/s; memory bound). Not expected of the fusion
# codegen (no gather pattern). Random 2 KB rows gathered 4x from a 537 MB table overrun the
# 60 MB L2, so DRAM traffic is nearer 2.2 GB: expect ~0.5 ms at best.
import torch
import torch.nn as nn

batch_size = 16384
bag_size = 64
num_embeddings = 262144
embedding_dim = 512


class Model(nn.Module):
    """nn.Embedding(num_embeddings, embedding_dim)(ids).sum(dim=1).

    Output shape: (batch_size, embedding_dim)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids).sum(dim=1)


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size, bag_size))]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
