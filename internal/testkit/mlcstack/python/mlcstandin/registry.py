"""The stand-in's global function and object-class registries (what
TVM_FFI_REGISTER_GLOBAL and TVM's object type keys fill in C++)."""

GLOBAL_FUNCS = {}
OBJECT_CLASSES = {}

_loaded = False


def load():
    """Registers the stand-in's functions, once."""
    global _loaded  # noqa: PLW0603
    if not _loaded:
        _loaded = True
        from . import functions  # noqa: F401  (registers on import)
