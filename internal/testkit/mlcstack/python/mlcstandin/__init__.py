"""Stand-ins for the C++ half of MLC-LLM's `mlc_llm serve` (and for TVM),
so that MLC's own Python serving layer runs unmodified on top of them: the
FastAPI entrypoints, ServerContext, AsyncMLCEngine and engine_base.

- registry.py, functions.py: the global functions MLC's Python calls
  (tvm_ffi.init_ffi_api), by their C++ names.
- tokenizer.py: Tokenizer, TextStreamer and StopStrHandler
  (cpp/tokenizers/tokenizers.cc, streamer.cc) for the built-in tiny model.
- engine.py: the threaded serving engine (cpp/serve/threaded_engine.cc,
  engine.cc, request_state.cc, engine_actions/disagg_*.cc), which asks a
  caddy-mlc built-in engine (its backend) for the tokens.
- hooks.py: the modules of MLC's build that its sources import but the
  source tree lacks (mlc_llm.base, mlc_llm.cli.check_device).
- serve.py: `python -m mlcstandin.serve ...` runs MLC's own
  cli/serve.py main, as `python -m mlc_llm serve ...` does.

Test code only: caddy-mlc's CI runs the router against MLC's serving layer
with these.
"""
