"""The machine a judge runs on: the environment its results record (GPU, driver, CUDA, torch,
Triton, Python, the isolation layers in force) and the GPU device node its sandbox binds.
"""

from __future__ import annotations

import dataclasses
import json
import platform
from typing import Any

from ..results import Environment


def sandbox_device(torch, cuda: bool) -> str:
    """ "cpu", or "cuda:M" with M the minor number of this judge's GPU's device node
    (/dev/nvidiaM): the sandbox binds that node and no other GPU's."""
    if not cuda:
        return "cpu"
    props = torch.cuda.get_device_properties(0)
    bus = getattr(props, "pci_bus_id", None)
    domain = getattr(props, "pci_domain_id", 0)
    device = getattr(props, "pci_device_id", 0)
    if bus is not None:
        info = f"/proc/driver/nvidia/gpus/{domain:04x}:{bus:02x}:{device:02x}.0/information"
        try:
            with open(info) as f:
                for line in f:
                    if line.startswith("Device Minor:"):
                        return f"cuda:{int(line.split(':')[1])}"
        except (OSError, ValueError):
            pass
    return "cuda:all"


def judge_environment(torch, cuda: bool, layers: tuple[str, ...], note: str = "") -> Environment:
    import triton

    gpu = driver = cuda_version = ""
    if cuda:
        gpu = torch.cuda.get_device_name(0)
        cuda_version = torch.version.cuda or ""
        from .roofline import driver_version

        driver = driver_version()
    return Environment(
        device="cuda" if cuda else "cpu",
        gpu=gpu,
        driver=driver,
        cuda=cuda_version,
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        interpreter=not cuda,
        isolation=layers,
        sandbox_note=note,
    )


def environment_dict(env: Environment) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(env)))
