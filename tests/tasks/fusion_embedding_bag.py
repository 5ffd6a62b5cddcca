import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Embedding bags: a module lookup summed over each bag, and a functional lookup of a second
    table (int32 ids) averaged over its bags and scaled; the third output returns a lookup as is,
    which stays torch's."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)
        self.table = nn.Parameter(torch.randn(num_embeddings // 2, embedding_dim + 3))

    def forward(self, ids, ids32, single):
        bags = self.embedding(ids).sum(dim=1)
        means = F.embedding(ids32, self.table).mean(dim=1) * 0.5
        return bags, means, self.embedding(single)


batch_size = 3
bag_size = 7
num_embeddings = 50
embedding_dim = 40


def get_inputs():
    return [
        torch.randint(0, num_embeddings, (batch_size, bag_size)),
        torch.randint(0, num_embeddings // 2, (batch_size + 2, bag_size - 2), dtype=torch.int32),
        torch.randint(0, num_embeddings, (batch_size,)),
    ]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
