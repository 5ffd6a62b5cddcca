"""kernelwright: PyTorch programs to fast, verified Triton kernels with LLM agents.

Kept import-light on purpose: the sandbox worker imports `kernelwright.sandbox` and must not pay
for (or be able to reach) the agent stack.
"""

__version__ = "0.1.0"
