"""Stand-in for tvm_ffi, TVM's foreign function interface (C++ in the real
package): the global function registry that MLC-LLM's Python layer calls
into, the object-class registry, and Shape.

MLC's modules do ``tvm_ffi.init_ffi_api("mlc.serve", __name__)`` to receive
the C++ functions registered under that prefix; here those functions are
the Python ones of the ``mlcstandin`` package (see mlcstandin/registry.py).
"""

import enum
import sys

from mlcstandin import registry


class Shape(tuple):
    """tvm_ffi.Shape: an immutable array of integers."""

    def __new__(cls, values=()):
        return super().__new__(cls, (int(v) for v in values))


class DLDeviceType(enum.IntEnum):
    """DLPack's device types (the ones MLC names)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLROCM = 10


def register_object(type_key):
    """Records the Python class of a C++ object type, so that the stand-in
    core can create objects of that class (as TVM returns them)."""

    def register(cls):
        registry.OBJECT_CLASSES[type_key] = cls
        return cls

    return register


def register_global_func(name, f=None, override=False):
    """Registers a global function (usable as a decorator)."""

    def register(func):
        if name in registry.GLOBAL_FUNCS and not override:
            raise ValueError(f"global function {name} is already registered")
        registry.GLOBAL_FUNCS[name] = func
        return func

    return register(f) if f is not None else register


def get_global_func(name, allow_missing=False):
    """Returns the global function called name."""
    registry.load()
    func = registry.GLOBAL_FUNCS.get(name)
    if func is None and not allow_missing:
        raise ValueError(f"Cannot find global function {name}")
    return func


def init_ffi_api(prefix, module_name):
    """Exposes the global functions "<prefix>.<name>" as attributes <name>
    of the module module_name."""
    registry.load()
    module = sys.modules[module_name]
    for name, func in registry.GLOBAL_FUNCS.items():
        if name.startswith(prefix + ".") and "." not in name[len(prefix) + 1 :]:
            setattr(module, name[len(prefix) + 1 :], func)

    def missing(attr):
        func = registry.GLOBAL_FUNCS.get(prefix + "." + attr)
        if func is None:
            raise AttributeError(f"the C++ stand-in has no function {prefix}.{attr}")
        return func

    module.__getattr__ = missing
