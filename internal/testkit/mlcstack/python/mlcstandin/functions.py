"""The global functions of MLC's C++ library that its Python serving layer
calls, registered under their C++ names (TVM_FFI_REGISTER_GLOBAL in
cpp/serve/*.cc and cpp/tokenizers/*.cc). Arguments that are stand-in
objects arrive wrapped in MLC's Python classes; handle() unwraps them."""

import json

from tvm_ffi import Shape, register_global_func

from . import engine, registry, tokenizer


def handle(obj):
    return getattr(obj, "__handle__", obj)


_FUNCS = {
    # cpp/serve/threaded_engine.cc
    "mlc.serve.create_threaded_engine": lambda: engine.Engine(),
    # cpp/serve/data.cc
    "mlc.serve.TextData": lambda text: engine.TextData(text),
    "mlc.serve.TextDataGetTextString": lambda d: handle(d).text,
    "mlc.serve.TokenData": lambda *ids: engine.TokenData(ids),
    "mlc.serve.TokenDataGetTokenIds": lambda d: Shape(handle(d).token_ids),
    # cpp/serve/request.cc
    "mlc.serve.RequestGetInputs": lambda r: handle(r).inputs,
    "mlc.serve.RequestGetGenerationConfigJSON": lambda r: json.dumps(handle(r).cfg.raw),
    # cpp/serve/event_trace_recorder.cc: tracing is not recorded.
    "mlc.serve.EventTraceRecorder": lambda: object(),
    "mlc.serve.EventTraceRecorderAddEvent": lambda rec, request_id, event: None,
    "mlc.serve.EventTraceRecorderDumpJSON": lambda rec: "[]",
    # cpp/tokenizers/tokenizers.cc
    "mlc.tokenizers.Tokenizer": lambda path: tokenizer.Tokenizer(path),
    "mlc.tokenizers.TokenizerEncode": lambda t, text: Shape(handle(t).encode(text)),
    "mlc.tokenizers.TokenizerEncodeBatch": lambda t, texts: [Shape(handle(t).encode(x)) for x in texts],
    "mlc.tokenizers.TokenizerDecode": lambda t, ids: handle(t).decode(list(ids)),
    "mlc.tokenizers.DetectTokenizerInfo": lambda path: json.dumps(
        {"token_postproc_method": "byte_level", "prepend_space_in_encode": False, "strip_space_in_decode": False}
    ),
    # cpp/tokenizers/streamer.cc
    "mlc.tokenizers.TextStreamer": lambda t: tokenizer.TextStreamer(handle(t)),
    "mlc.tokenizers.TextStreamerPut": lambda s, ids: handle(s).put(list(ids)),
    "mlc.tokenizers.TextStreamerFinish": lambda s: handle(s).finish(),
    "mlc.tokenizers.StopStrHandler": lambda stops, t: tokenizer.StopStrHandler(list(stops), handle(t).table),
    "mlc.tokenizers.StopStrHandlerPut": lambda h, token_id: Shape(handle(h).put(token_id)),
    "mlc.tokenizers.StopStringHandlerFinish": lambda h: Shape(handle(h).finish()),
    "mlc.tokenizers.StopStrHandlerStopTriggered": lambda h: handle(h).stop_triggered,
}


def _unpack(output):
    """mlc.serve.RequestStreamOutputUnpack (data.cc): the fields of a
    stream output, once."""
    fields = handle(output)
    if getattr(output, "_unpacked", False):
        raise RuntimeError("One RequestStreamOutput can be unpacked for at most once.")
    output._unpacked = True
    request_id, ids, logprobs, finish, usage, prefix = fields
    return [request_id, [Shape(d) for d in ids], logprobs, finish, usage, prefix]


_FUNCS["mlc.serve.RequestStreamOutputUnpack"] = _unpack

for _name, _func in _FUNCS.items():
    register_global_func(_name, _func)

assert registry.GLOBAL_FUNCS
