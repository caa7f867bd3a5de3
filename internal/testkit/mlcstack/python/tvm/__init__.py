"""Stand-in for Apache TVM's Python package, whose runtime is C++: the
global function registry (shared with tvm_ffi), devices and Object.

Importing it also installs the stand-ins for the modules of MLC-LLM's
build that the MLC sources import but do not contain (see
mlcstandin/hooks.py): mlc_llm.base, the loader of MLC's C++ library, and
mlc_llm.cli.check_device, the device probe that support/auto_device.py
runs in a subprocess.
"""

from mlcstandin import hooks as _hooks
from tvm_ffi import get_global_func, register_global_func

from . import relax, runtime
from .runtime import Device, Object, device

_hooks.install()

__all__ = ["Device", "Object", "device", "get_global_func", "register_global_func", "relax", "runtime"]
