"""Stand-in for tvm.runtime: Object (the base of every C++-backed class),
Device and Tensor."""

from tvm_ffi import DLDeviceType


class Object:
    """The base class of C++ objects. A stand-in object holds its Python
    implementation as __handle__, which the stand-in's functions unwrap."""

    __handle__ = None

    def __init_handle_by_constructor__(self, constructor, *args):
        self.__handle__ = constructor(*args)

    def same_as(self, other):
        return self.__handle__ is getattr(other, "__handle__", None)


class Device:
    """A device: DLPack type and index."""

    _DEVICE_TYPE_TO_NAME = {
        DLDeviceType.kDLCPU: "cpu",
        DLDeviceType.kDLCUDA: "cuda",
        DLDeviceType.kDLOpenCL: "opencl",
        DLDeviceType.kDLVulkan: "vulkan",
        DLDeviceType.kDLMetal: "metal",
        DLDeviceType.kDLROCM: "rocm",
    }
    _NAME_TO_DEVICE_TYPE = {v: k for k, v in _DEVICE_TYPE_TO_NAME.items()}

    def __init__(self, device_type, index=0):
        self.device_type = DLDeviceType(device_type)
        self.index = index

    def dlpack_device_type(self):
        return self.device_type

    def __repr__(self):
        return f"{self._DEVICE_TYPE_TO_NAME[self.device_type]}:{self.index}"


def device(device_type, index=None):
    """tvm.device("cuda:1"), tvm.device("cpu") or tvm.device(device_type="cuda", index=0)."""
    if isinstance(device_type, str):
        name, _, idx = device_type.partition(":")
        if name not in Device._NAME_TO_DEVICE_TYPE:
            raise ValueError(f"unknown device {device_type!r}")
        if index is None:
            index = int(idx) if idx else 0
        return Device(Device._NAME_TO_DEVICE_TYPE[name], index)
    return Device(device_type, index or 0)


class Tensor:
    """tvm.runtime.Tensor: only named by annotations on the serving path."""


def tensor(*args, **kwargs):
    raise NotImplementedError("the C++ stand-in has no tensors (image inputs, embeddings)")


def load_module(path):
    raise NotImplementedError("the C++ stand-in loads no model library")
