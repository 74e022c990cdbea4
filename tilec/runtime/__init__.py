"""Runtime: compile lowered Triton source, check tensors, launch kernels (interpreter without CUDA)."""

from tilec.runtime.kernel import Kernel, build

__all__ = ["Kernel", "build"]
