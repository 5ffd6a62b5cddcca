"""kernelwright's exceptions: the root, KernelwrightError, and its faults (defined in
sandbox/errors.py, which sealed sandbox/ may import; every other room imports it from here)."""

from .sandbox.errors import FAULTS as FAULTS
from .sandbox.errors import Fault as Fault
from .sandbox.errors import KernelwrightError as KernelwrightError
