"""Runtime: compile lowered Triton source, check tensors, launch kernels (interpreter without CUDA)."""

from tilec.runtime.custom_op import Graphed, as_op, graphed, registered_ops
from tilec.runtime.kernel import Kernel, build

__all__ = ["Graphed", "Kernel", "as_op", "build", "graphed", "registered_ops"]
