"""Stand-in for mlc_llm.base, which loads MLC's C++ library (libmlc_llm)
in a real install: the stand-in's C++ is Python, registered with tvm_ffi
(see mlcstandin/functions.py)."""

from mlcstandin import registry

registry.load()
