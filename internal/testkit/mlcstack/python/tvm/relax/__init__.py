"""Stand-in for tvm.relax, imported by MLC's embedding engine (not served
by the stand-in)."""
