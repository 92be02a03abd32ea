"""The module-spec records the compiler produces (from kiln.vm.module_spec)."""
from kiln.vm.module_spec import BindingSpec, KernelImageSpec, KernelSpec

__all__ = ["BindingSpec", "KernelImageSpec", "KernelSpec"]
