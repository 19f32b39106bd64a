"""The kernel: the process that owns a home, runs tasks, and answers the owner."""

from .kernel import Kernel, KernelStatistics, open_kernel

__all__ = ["Kernel", "KernelStatistics", "open_kernel"]
