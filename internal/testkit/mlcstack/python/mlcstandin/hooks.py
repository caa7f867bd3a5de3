"""The modules of an MLC-LLM build that its Python sources import but that
are not in the source tree, served by an import hook:

- mlc_llm.base loads libmlc_llm (C++) in a real install; here the C++ is
  the stand-in, so it has nothing to load.
- mlc_llm.cli.check_device prints the devices TVM finds; support/
  auto_device.py runs it in a subprocess. The stand-in finds a CPU only.
"""

import importlib.abc
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

MODULES = {
    "mlc_llm.base": os.path.join(_HERE, "base.py"),
    "mlc_llm.cli.check_device": os.path.join(_HERE, "check_device.py"),
}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        filename = MODULES.get(fullname)
        if filename is None:
            return None
        return importlib.util.spec_from_file_location(fullname, filename)


def install():
    """Installs the hook, once."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
