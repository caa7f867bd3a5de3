"""Stand-in for MLC-LLM's C++ serving engine: the module that
mlc.serve.create_threaded_engine returns to serve/engine_base.py
(cpp/serve/threaded_engine.cc over engine.cc), with the request
bookkeeping of engine.cc (AddRequest, HandleDisaggRequest,
AbortRequestImpl), the per-step output of request_state.cc
(RequestStateEntryNode::GetDeltaRequestReturn), the disaggregation
actions (engine_actions/disagg_prepare_recv.cc, disagg_remote_send.cc)
and the final usage of engine_actions/action_commons.cc.

The tokens come from a caddy-mlc built-in engine, the backend, whose base
URL is in $CADDY_MLC_STANDIN_BACKEND:

- a generation streams from the backend's /v1/completions (one stream per
  choice, seeded as MLC seeds its n branches: seed + i + 1), asking for no
  stop strings: stop strings, stop tokens, max_tokens and the context
  length are applied here, token by token, as MLC applies them;
- prepare_receive, remote_send and start_generation are the backend's
  /microserving/prep_recv, /remote_send and /start_generate for the same
  request id (MLC's entrypoints use the request's user as its id), so the
  prefill backend writes the KV straight into the decode backend; a
  start_generation reuses the prompt and generation config recorded at
  its prepare_receive, as MLC's does;
- an abort closes the backend calls, which frees their KV there; an abort
  after prepare_receive frees nothing, as in MLC.

What MLC does silently is recorded as events (see event()). What it does
not emulate: MLC's scheduling (batching, its 400-page watermark for
prep_recv, prefix-cache policy) is the backend's; logprobs are the
backend's distribution (MLC's at temperature 0 is one-hot), and the stop
token's own logprobs entry is missing; the backend ends a generation with
"stop" at EOS and at its template's stop string "\nuser:" (the model's
conv_template stop_str, which MLC applies too), both taken as EOS here;
images and speculative decoding are not served.

A generation's response_format is the one of the request that generates
in MLC (engine.cc AddRequest compiles its grammar; a start_generation
goes on under its prepare_receive's config, whatever its own says). It
goes to the backend, which honours a json_object format with its JSON
grammar as MLC's xgrammar does, and is recorded as MLC's Python handed it
(see generation_record()).

A failed check of MLC's C++ (TVM_FFI_ICHECK) kills the stand-in's
process, where it kills MLC's engine thread and leaves the server up but
hanging every request.
"""

import http.client
import json
import math
import os
import socket
import struct
import sys
import threading
import traceback
import urllib.parse

from . import registry
from .tokenizer import StopStrHandler, Tokenizer

BACKEND_ENV = "CADDY_MLC_STANDIN_BACKEND"
EVENTS_ENV = "CADDY_MLC_STANDIN_EVENTS"
PREEMPT_ENV = "CADDY_MLC_STANDIN_PREEMPT_REMOTE_SEND"
GENERATIONS_ENV = "CADDY_MLC_STANDIN_GENERATIONS"

_DUMMY_USAGE = '{ "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0 }'


def fatal(message):
    """A failed check in MLC's C++ (see the module's doc): the process dies."""
    sys.stderr.write(f"[mlc stand-in] Check failed: {message}\n")
    sys.stderr.flush()
    os.abort()


_events_lock = threading.Lock()


def event(kind, message, harmful=False):
    """Records something notable MLC's engine does silently: a line on
    stderr, and one in the file $CADDY_MLC_STANDIN_EVENTS names. harmful
    marks what corrupts other requests (a KV write into pages the decode
    engine no longer reserves)."""
    sys.stderr.write(f"[mlc stand-in] {'HAZARD ' if harmful else ''}{kind}: {message}\n")
    path = os.environ.get(EVENTS_ENV)
    if path:
        with _events_lock, open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, "harmful": harmful, "message": message}) + "\n")


_generations_lock = threading.Lock()


def generation_record(request_id, kind, cfg):
    """Appends a line to the file $CADDY_MLC_STANDIN_GENERATIONS names for
    each generation that starts: the request id, the disagg kind of the
    request that started it (None for a plain one) and the response_format
    it generates under, as MLC's Python serialised it for create_request
    (GenerationConfig.model_dump_json(by_alias=True), parsed)."""
    path = os.environ.get(GENERATIONS_ENV)
    if path:
        line = json.dumps({"id": request_id, "kind": kind, "response_format": cfg.raw.get("response_format")})
        with _generations_lock, open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def icheck(cond, message):
    """TVM_FFI_ICHECK."""
    if not cond:
        fatal(message)


def _f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def _token_logprob_json(token, logprob):
    """One token's part of a logprob JSON string, byte for byte as
    data.cc TokenToLogProbJSON writes it: the token's visible ASCII
    characters, log(max(p, 1e-10f)) in float printed with six significant
    digits, and the token's bytes."""
    text = "".join(
        "\\" + chr(b) if b in (0x22, 0x5C) else chr(b) for b in token if 33 <= b <= 126
    )
    p = max(_f32(math.exp(logprob)), _f32(1e-10))
    value = "%g" % _f32(math.log(p))
    return f'"token": "{text}", "logprob": {value}, "bytes": [{", ".join(str(b) for b in token)}]'


def logprob_json(token, logprob, top):
    """SampleResult::GetLogProbJSON (data.cc); top is [(token, logprob)]."""
    tops = ", ".join("{" + _token_logprob_json(t, lp) + "}" for t, lp in top)
    return "{" + _token_logprob_json(token, logprob) + ', "top_logprobs": [' + tops + "]}"


class GenerationConfig:
    """The C++ GenerationConfig of a request (config.cc FromJSON and
    Validate), from the JSON that engine.py's create_request passes."""

    def __init__(self, cfg):
        def get(key, default):
            value = cfg.get(key)
            return default if value is None else value

        self.n = get("n", 1)
        self.temperature = get("temperature", 1.0)
        self.top_p = get("top_p", 1.0)
        self.frequency_penalty = get("frequency_penalty", 0.0)
        self.presence_penalty = get("presence_penalty", 0.0)
        self.repetition_penalty = get("repetition_penalty", 1.0)
        self.logprobs = get("logprobs", False)
        self.top_logprobs = get("top_logprobs", 0)
        self.logit_bias = {int(k): v for k, v in get("logit_bias", {}).items()}
        self.seed = cfg.get("seed")  # C++ draws one at random when absent
        self.max_tokens = get("max_tokens", -1)
        self.stop_strs = list(get("stop_strs", []))
        self.stop_token_ids = list(get("stop_token_ids", []))
        self.response_format = cfg.get("response_format")
        debug = get("debug_config", {})
        self.ignore_eos = debug.get("ignore_eos") or False
        self.special_request = debug.get("special_request")
        disagg = debug.get("disagg_config") or {}
        self.disagg_kind = disagg.get("kind")
        self.kv_append_metadata = disagg.get("kv_append_metadata")
        self.kv_window_begin = disagg.get("kv_window_begin")
        self.kv_window_end = disagg.get("kv_window_end")
        self.dst_group_offset = disagg.get("dst_group_offset")
        self.raw = cfg

    def validate(self):
        if self.n <= 0:
            raise ValueError('"n" should be at least 1')
        if self.temperature < 0:
            raise ValueError('"temperature" should be non-negative')
        if self.top_p < 0 or self.top_p > 1:
            raise ValueError('"top_p" should be in range [0, 1]')
        if abs(self.frequency_penalty) > 2.0:
            raise ValueError("frequency_penalty must be in [-2, 2]!")
        if self.repetition_penalty <= 0:
            raise ValueError('"repetition_penalty" must be positive')
        if self.top_logprobs < 0 or self.top_logprobs > 20:
            raise ValueError("At most 20 top logprob tokens are supported")
        if self.top_logprobs != 0 and not self.logprobs:
            raise ValueError('"logprobs" must be true to support "top_logprobs"')
        for bias in self.logit_bias.values():
            if abs(bias) > 100.0:
                raise ValueError("Logit bias value should be in range [-100, 100].")


class Request:
    """A request as create_request makes it: id, inputs, config."""

    def __init__(self, request_id, inputs, cfg):
        self.id = request_id
        self.inputs = inputs  # Data handles: TokenData or TextData
        self.cfg = cfg
        self.prompt = None  # token ids, once AddRequest tokenized the inputs


class TokenData:
    """mlc.serve.TokenData."""

    def __init__(self, token_ids):
        self.token_ids = [int(t) for t in token_ids]


class TextData:
    """mlc.serve.TextData."""

    def __init__(self, text):
        self.text = text


class _Call:
    """One HTTP call to the backend, which another thread may cut (an
    abort): the backend sees its client go and drops the request."""

    def __init__(self, base):
        url = urllib.parse.urlsplit(base)
        self.conn = http.client.HTTPConnection(url.hostname, url.port)
        self.lock = threading.Lock()
        self.closed = False

    def close(self):
        with self.lock:
            self.closed = True
            sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def post(self, path, body):
        """Sends the request; returns the response, or None once closed."""
        data = json.dumps(body).encode()
        with self.lock:
            if self.closed:
                return None
            self.conn.connect()
        try:
            self.conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            return self.conn.getresponse()
        except (OSError, http.client.HTTPException):
            if self.closed:
                return None
            raise

    def finish(self):
        self.close()
        self.conn.close()


def _read_json(resp):
    raw = resp.read()
    try:
        return json.loads(raw)
    except ValueError:
        return {"raw": raw.decode(errors="replace")}


def _error_code(body):
    err = body.get("error") if isinstance(body, dict) else None
    return err.get("code") if isinstance(err, dict) else None


def _sse(resp):
    """Yields the JSON objects of a server-sent event stream, up to [DONE]."""
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        yield json.loads(data)


class _Preempted:
    """The backend's answer to a remote_send it preempted."""

    status = 503


class _State:
    """A request's entry in estate->request_states."""

    def __init__(self, request):
        self.request = request
        self.status = "waiting"  # waiting | prepared | running
        self.calls = []
        self.aborted = False
        self.lock = threading.Lock()  # orders this request's callbacks


class Engine:
    """The threaded engine (threaded_engine.cc) and its EngineImpl."""

    def __init__(self):
        self.lock = threading.RLock()
        self.states = {}
        self.callback = None
        self.exited = threading.Event()
        self.config = None
        self.tokenizer = None
        self.backend = os.environ.get(BACKEND_ENV)
        # Every Nth remote_send is preempted, as KV pressure preempts one
        # on a loaded prefill engine (0: only when the backend does).
        self.preempt_every = int(os.environ.get(PREEMPT_ENV) or 0)
        self.remote_sends = 0
        self.metrics = {
            "prompt_tokens_sum": 0,
            "completion_tokens_sum": 0,
            "prefill_tokens_sum": 0,
            "decode_tokens_sum": 0,
        }
        self.functions = {
            "add_request": self.add_request,
            "abort_request": self.abort_request,
            "run_background_loop": self.run_background_loop,
            "run_background_stream_back_loop": self.run_background_loop,
            "reload": self.reload,
            "init_threaded_engine": self.init_threaded_engine,
            "exit_background_loop": self.exit_background_loop,
            "create_request": self.create_request,
            "get_complete_engine_config": self.get_complete_engine_config,
            "reset": self.reset,
            "debug_call_func_on_all_worker": self.debug_call_func_on_all_worker,
        }

    def __getitem__(self, name):
        return self.functions[name]

    # ---- threaded engine lifecycle ----

    def init_threaded_engine(self, device, callback, trace_recorder):
        self.callback = callback

    def reload(self, engine_config_json):
        """Loads the model's config and tokenizer and completes the engine
        config as the C++ engine infers it."""
        if not self.backend:
            raise RuntimeError(f"the C++ stand-in needs its backend engine's URL in ${BACKEND_ENV}")
        cfg = json.loads(engine_config_json)
        with open(os.path.join(cfg["model"], "mlc-chat-config.json"), encoding="utf-8") as f:
            model = json.load(f)
        context = model["context_window_size"]
        total = cfg.get("max_total_sequence_length") or context
        single = min(cfg.get("max_single_sequence_length") or context, total)
        cfg["max_total_sequence_length"] = total
        cfg["max_single_sequence_length"] = single
        cfg["prefill_chunk_size"] = cfg.get("prefill_chunk_size") or model["prefill_chunk_size"]
        cfg["max_num_sequence"] = cfg.get("max_num_sequence") or {"local": 4, "interactive": 1}.get(cfg.get("mode"), 64)
        cfg["max_history_size"] = cfg.get("max_history_size") or 1
        cfg["kv_state_kind"] = "kv_cache"
        cfg["sliding_window_size"] = cfg.get("sliding_window_size") or -1
        cfg["attention_sink_size"] = cfg.get("attention_sink_size") or 0
        cfg["prefix_cache_max_num_recycling_seqs"] = cfg.get("prefix_cache_max_num_recycling_seqs") or cfg["max_num_sequence"]
        self.config = cfg
        self.tokenizer = Tokenizer(cfg["model"])

    def get_complete_engine_config(self):
        return json.dumps(self.config)

    def run_background_loop(self):
        self.exited.wait()

    def exit_background_loop(self):
        with self.lock:
            ids = list(self.states)
        for request_id in ids:
            self.abort_request(request_id)
        self.exited.set()

    def reset(self):
        for key in self.metrics:
            self.metrics[key] = 0

    def debug_call_func_on_all_worker(self, func_name, func_args=None):
        pass

    def create_request(self, request_id, inputs, generation_config_json):
        cfg = GenerationConfig(json.loads(generation_config_json))
        cfg.validate()
        request = Request(str(request_id), [getattr(d, "__handle__", d) for d in inputs], cfg)
        cls = registry.OBJECT_CLASSES["mlc.serve.Request"]
        obj = cls.__new__(cls)
        obj.__handle__ = request
        return obj

    # ---- callbacks ----

    def _output(self, request_id, delta_ids, logprobs, finish, usage=None):
        """A RequestStreamOutput: per choice, the delta token ids, logprob
        JSON strings (None when not asked for), finish reason and extra
        prefix string; or the final usage."""
        cls = registry.OBJECT_CLASSES["mlc.serve.RequestStreamOutput"]
        obj = cls.__new__(cls)
        obj.__handle__ = [request_id, delta_ids, logprobs, finish, usage, [""] * len(delta_ids)]
        return obj

    def _usage_output(self, request_id, usage):
        return self._output(request_id, [], None, [], json.dumps(usage))

    def _stream_back_error(self, request, reason):
        """StreamBackErrorImpl (engine.cc): every choice ends with reason,
        then a zero usage."""
        n = request.cfg.n
        outs = [self._output(request.id, [[] for _ in range(n)], None, [reason] * n)]
        outs.append(self._output(request.id, [], None, [], _DUMMY_USAGE))
        self.callback(outs)

    def _engine_metrics(self):
        """EngineMetrics::AsJSON (metrics.cc), without timings."""
        m = dict(self.metrics)
        m.update(engine_prefill_time_sum=0.0, engine_decode_time_sum=0.0, engine_jump_forward_time_sum=0.0, jump_forward_tokens_sum=0)
        m["last_finished_request"] = {}
        return m

    # ---- requests ----

    def add_request(self, obj):
        request = obj.__handle__
        cfg = request.cfg
        if cfg.special_request == "query_engine_metrics":
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "extra": self._engine_metrics()}
            self.callback([self._usage_output(request.id, usage)])
            return
        prompt = []
        for data in request.inputs:
            prompt += data.token_ids if isinstance(data, TokenData) else self.tokenizer.encode(data.text)
        request.prompt = prompt
        if len(prompt) >= self.config["max_single_sequence_length"]:
            self._stream_back_error(request, "length")
            return
        kind = cfg.disagg_kind
        with self.lock:
            if kind == "start_generation":
                self._start_generation(request)
                return
            if kind == "remote_send":
                self._check_remote_send(request)
                cfg.n = 1
            elif kind == "prepare_receive":
                self._check_prepare_receive(request)
            state = _State(request)
            self.states.setdefault(request.id, state)  # emplace: an existing entry stays
            if kind == "prepare_receive":
                target = self._prepare_receive
            elif kind == "remote_send":
                target = self._remote_send
            else:
                target = Generation(self, state, request, request.prompt).run
                state.status = "running"
                generation_record(request.id, None, cfg)
            call = _Call(self.backend)
            state.calls.append(call)
        self._spawn(target, state, call)

    def _spawn(self, target, *args):
        def run():
            try:
                target(*args)
            except Exception:  # noqa: BLE001  (a C++ exception ends the engine)
                fatal("unexpected error in the stand-in engine:\n" + traceback.format_exc())

        threading.Thread(target=run, daemon=True).start()

    def _window_end(self, request, default):
        end = request.cfg.kv_window_end
        if end is None:
            return default
        return len(request.prompt) + end if end < 0 else end

    def _check_prepare_receive(self, request):
        """The checks of DisaggPrepareReceiveActionObj."""
        icheck((request.cfg.kv_window_begin or 0) == 0, "kv_window_begin == 0 for prepare_receive")
        end = self._window_end(request, len(request.prompt))
        icheck(end >= 0, f"kv_window_end {end} >= 0")
        icheck(end < len(request.prompt), "Prefill the full input on the remote machine is not supported.")

    def _check_remote_send(self, request):
        """The checks of HandleDisaggRequest for remote_send."""
        cfg = request.cfg
        begin = cfg.kv_window_begin or 0
        end = self._window_end(request, len(request.prompt))
        icheck(begin >= 0, f"kv_window_begin {begin} >= 0")
        icheck(end < len(request.prompt), "Prefill the full input on the remote machine is not supported.")
        icheck(begin < end, '"begin >= end" is not supported by remote prefill')
        icheck(cfg.kv_append_metadata is not None, "kv_append_metadata is set")
        icheck(cfg.dst_group_offset is not None, "dst_group_offset is set")
        try:
            flat = json.loads(__import__("base64").b64decode(cfg.kv_append_metadata))
        except ValueError:
            fatal("kv_append_metadata is base64 of a JSON array")
        icheck(len(flat) == flat[0] * 2 + 1, "one model's compressed kv_append_metadata")
        icheck(sum(flat[2::2]) == end - begin, "transmission length == kv_window_end - kv_window_begin")

    def _prepare_receive(self, state, call):
        """Reserves the KV of [0, end) on the backend and answers the
        reservation in the final usage, as DisaggPrepareReceiveActionObj."""
        request = state.request
        end = self._window_end(request, len(request.prompt))
        resp = call.post("/microserving/prep_recv", {"prompt": request.prompt, "end": end, "user": request.id})
        body = _read_json(resp) if resp is not None else None
        call.finish()
        with self.lock:
            if state.aborted or resp is None:
                return
            state.calls.remove(call)
            icheck(resp.status == 200, f"backend prep_recv answered {resp.status}: {body}")
            state.status = "prepared"
        usage = {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "extra": {
                "prompt_length": len(request.prompt),
                "prefix_matched_length": body["prefix_matched_length"],
                "kv_append_metadata": body["kv_append_metadata"],
            },
        }
        with state.lock:
            self.callback([self._usage_output(request.id, usage)])

    def _remote_send(self, state, call):
        """Computes the KV of [begin, end) on the backend, which writes it
        into the decode backend that holds PE dst_group_offset. A backend
        that preempts the computation ends the request with finish reason
        "preempt", as MLC preempts a request in disaggregation mode."""
        request = state.request
        cfg = request.cfg
        body = {
            "prompt": request.prompt,
            "begin": cfg.kv_window_begin or 0,
            "end": self._window_end(request, len(request.prompt)),
            "kv_addr_info": cfg.kv_append_metadata,
            "recv_rank": cfg.dst_group_offset,
            "user": request.id,
        }
        with self.lock:
            self.remote_sends += 1
            injected = self.preempt_every > 0 and self.remote_sends % self.preempt_every == 0
        if injected:
            resp, answer = _Preempted(), {"error": {"code": "preempt"}}
        else:
            resp = call.post("/microserving/remote_send", body)
            answer = _read_json(resp) if resp is not None else None
        call.finish()
        with self.lock:
            if state.aborted or resp is None:
                return
            self._erase(state)
            if resp.status == 400 and _unreserved(answer):
                # MLC's remote_send writes the KV with one-sided NVSHMEM
                # puts to the addresses prep_recv gave, whether or not the
                # decode engine still reserves them: it succeeds, and the
                # pages, if handed to another request since, are corrupted.
                event("kv_write_unreserved", f"remote_send of {request.id!r} wrote KV the decode engine no longer reserves: {answer}", harmful=True)
            if resp.status == 200 or (resp.status == 400 and _unreserved(answer)):
                self._count(len(request.prompt), 0)
                usage = {"prompt_tokens": len(request.prompt), "completion_tokens": 0, "total_tokens": len(request.prompt)}
                usage["extra"] = _request_metrics(len(request.prompt), 0)
                outs = [self._usage_output(request.id, usage)]
            else:
                icheck(resp.status == 503 and _error_code(answer) == "preempt", f"backend remote_send answered {resp.status}: {answer}")
                event("remote_send_preempted", f"remote_send of {request.id!r} was preempted{' (every %dth)' % self.preempt_every if injected else ''}")
                outs = None
        with state.lock:
            if outs is None:
                self._stream_back_error(request, "preempt")
            else:
                self.callback(outs)

    def _start_generation(self, request):
        """HandleDisaggRequest for start_generation (engine.cc): the request
        prepared under this id goes on, with its own prompt and generation
        config, from kv_window_begin (called with self.lock held)."""
        state = self.states.get(request.id)
        icheck(state is not None, f"start_generation: no request {request.id!r} (it_rstate != request_states.end())")
        prepared = state.request
        icheck(prepared.cfg.disagg_kind == "prepare_receive", "start_generation of a prepare_receive request")
        icheck(state.status == "prepared", "start_generation: the request is neither running nor waiting")
        n = len(prepared.prompt)
        icheck(request.cfg.kv_window_end is None or request.cfg.kv_window_end == n, "kv_window_end == input_length")
        begin = request.cfg.kv_window_begin or 0
        if begin < 0:
            begin += n
        icheck(0 <= begin < n, f"0 <= kv_window_begin {begin} < {n}")
        prepared.cfg.disagg_kind = None
        state.status = "running"
        generation_record(request.id, "start_generation", prepared.cfg)
        # With one token left to prefill and n == 1, MLC commits the last
        # prompt token as if generated (not streamed back) and raises
        # max_tokens by one: the context limit then comes one token early.
        early = 1 if n - begin == 1 and prepared.cfg.n == 1 else 0
        gen = Generation(self, state, prepared, prepared.prompt, attach=(request.id, begin), committed_before=early)
        call = _Call(self.backend)
        state.calls.append(call)
        self._spawn(gen.run, state, call)

    def abort_request(self, request_id):
        """AbortRequestImpl (engine.cc): forgets the request and frees what
        it holds if it is running or waiting. A prepared request (after
        prepare_receive, before start_generation) is in neither queue: its
        KV stays reserved, as in MLC."""
        with self.lock:
            state = self.states.pop(str(request_id), None)
            if state is None:
                return
            state.aborted = True
            calls = list(state.calls) if state.status != "prepared" else []
            if state.status == "prepared":
                event("abort_leaks_reservation", f"abort of {state.request.id!r} after prepare_receive: its KV stays reserved for good")
        for call in calls:
            call.close()
        with state.lock:
            self._stream_back_error(state.request, "abort")

    def _erase(self, state):
        """estate->request_states.erase(id) (with self.lock held): by id,
        so a request that shares its id with another (MLC's ids are the
        requests' users) erases whichever entry the map holds."""
        if self.states.get(state.request.id) is state:
            del self.states[state.request.id]
        else:
            self.states.pop(state.request.id, None)

    def _count(self, prompt_tokens, completion_tokens):
        self.metrics["prompt_tokens_sum"] += prompt_tokens
        self.metrics["completion_tokens_sum"] += completion_tokens
        self.metrics["prefill_tokens_sum"] += prompt_tokens
        self.metrics["decode_tokens_sum"] += completion_tokens


def _request_metrics(prompt_tokens, completion_tokens):
    """RequestMetrics::AsJSON (metrics.cc), without timings."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "prefill_tokens": prompt_tokens,
        "decode_tokens": completion_tokens,
        "jump_forward_tokens": 0,
    }


class _Choice:
    """One of the n parallel generations (a RequestStateEntry)."""

    def __init__(self, index, cfg, table, committed_before):
        self.index = index
        self.stop = StopStrHandler(cfg.stop_strs if not cfg.ignore_eos else [], table)
        self.committed = committed_before
        self.generated = 0
        self.finish = None


class Generation:
    """A request's decoding: one backend stream per choice, whose tokens go
    through GetDeltaRequestReturn's checks one step (token) at a time."""

    def __init__(self, engine, state, request, prompt, attach=None, committed_before=0):
        self.engine = engine
        self.state = state
        self.request = request
        self.cfg = request.cfg
        self.prompt = prompt
        self.attach = attach  # (user, begin): start_generate on the prepared KV
        self.tok = engine.tokenizer
        self.choices = [_Choice(i, self.cfg, self.tok.table, committed_before) for i in range(self.cfg.n)]
        self.live = self.cfg.n
        self.garbage_user = None  # see _garbage_kv
        self.preempted = False
        self.done = False

    def run(self, state, call):
        """Starts the other choices' streams and serves choice 0."""
        for i in range(1, self.cfg.n):
            with self.engine.lock:
                if state.aborted:
                    return
                c = _Call(self.engine.backend)
                state.calls.append(c)
            self.engine._spawn(self._serve, i, c)
        self._serve(0, call)

    def _body(self, index):
        cfg = self.cfg
        room = self.engine.config["max_single_sequence_length"] - len(self.prompt) - self.choices[index].committed
        body = {"prompt": self.prompt, "stream": True, "n": 1, "max_tokens": room if cfg.max_tokens < 0 else min(cfg.max_tokens, room)}
        body["temperature"] = cfg.temperature
        body["top_p"] = cfg.top_p
        if cfg.frequency_penalty:
            body["frequency_penalty"] = cfg.frequency_penalty
        if cfg.presence_penalty:
            body["presence_penalty"] = cfg.presence_penalty
        if cfg.logit_bias:
            body["logit_bias"] = {str(k): v for k, v in cfg.logit_bias.items()}
        if cfg.seed is not None:
            body["seed"] = cfg.seed if cfg.n == 1 else cfg.seed + index + 1
        if cfg.logprobs:
            body["logprobs"] = cfg.top_logprobs
        if cfg.ignore_eos:
            body["debug_config"] = {"ignore_eos": True}
        rf = cfg.response_format
        if rf and rf.get("type") == "json_object":
            # GetGrammarFromResponseFormat: JSON, or the schema's grammar.
            body["response_format"] = {"type": "json_object"}
            if rf.get("schema") is not None:
                body["response_format"]["schema"] = rf["schema"]
        return body

    def _serve(self, index, call):
        body = self._body(index)
        path = "/v1/completions"
        if index == 0 and self.attach is not None:
            path = "/microserving/start_generate"
            body["user"], body["begin"] = self.attach
        resp = call.post(path, body)
        if resp is not None and resp.status != 200:
            answer = _read_json(resp)
            if path != "/v1/completions" and resp.status == 400 and _missing_kv(answer):
                call.finish()
                call, resp = self._garbage_kv(call, body)
            elif not call.closed:
                fatal(f"backend {path} answered {resp.status}: {answer}")
        try:
            if resp is not None:
                for chunk in _sse(resp):
                    if not self._chunk(index, chunk):
                        break
        except (OSError, http.client.HTTPException, ValueError):
            if not call.closed:
                raise
        finally:
            call.finish()
            if index == 0 and self.garbage_user is not None:
                self._release_garbage()
        with self.engine.lock:
            if call in self.state.calls:
                self.state.calls.remove(call)
            gone = self.state.aborted or self.preempted or self.done
        if not gone and self.choices[index].finish is None:
            fatal(f"the backend stream of choice {index} of {self.request.id!r} ended without a finish reason")

    def _garbage_kv(self, call, body):
        """start_generate on KV that no remote_send wrote (it was
        preempted, or is still on its way): MLC decodes on whatever its
        pages hold. The stand-in decodes after one BOS token standing for
        the window [0, begin), so the answer is wrong, not an error, and
        takes few pages besides the reservation, which the request holds
        in MLC and gives back when the generation ends (see _serve).
        Returns the new call and its response (None once aborted)."""
        user, begin = body.pop("user"), body.pop("begin")
        self.garbage_user = user
        event("decode_on_missing_kv", f"start_generation of {user!r}: the KV of [0, {begin}) was never received; decoding on garbage")
        body["prompt"] = [0] + list(body["prompt"][begin:])
        new = _Call(self.engine.backend)
        with self.engine.lock:
            if call in self.state.calls:
                self.state.calls.remove(call)
            if self.state.aborted:
                return new, None
            self.state.calls.append(new)
        return new, new.post("/v1/completions", body)

    def _release_garbage(self):
        """Gives back the reservation a garbage decoding held (the stand-in's
        own use of the backend's release extension)."""
        rel = _Call(self.engine.backend)
        resp = rel.post("/microserving/release", {"user": self.garbage_user})
        if resp is not None:
            resp.read()
        rel.finish()

    def _chunk(self, index, chunk):
        """Commits a backend chunk's tokens; returns False once the choice
        (or the request) has ended."""
        for c in chunk.get("choices") or []:
            text = c.get("text") or ""
            ids = self.tok.encode(text)
            lps = []
            if self.cfg.logprobs:
                lp = c.get("logprobs") or {}
                tokens, values, tops = lp.get("tokens") or [], lp.get("token_logprobs") or [], lp.get("top_logprobs") or []
                icheck(len(tokens) == len(ids), f"backend logprobs of {len(tokens)} tokens for {len(ids)} tokens")
                for t, v, top in zip(tokens, values, tops):
                    lps.append(logprob_json(t.encode(), v, [(k.encode(), x) for k, x in top.items()]))
            for k, token in enumerate(ids):
                if not self._step(index, token, lps[k] if lps else None):
                    return False
            finish = c.get("finish_reason")
            if finish == "preempt":
                self._preempt()
                return False
            if finish == "stop":  # EOS: the backend asked for no stop strings
                if not self._step(index, self.tok.eos_token_ids[0], None):
                    return False
                if not self.cfg.ignore_eos:
                    fatal(f"EOS did not end choice {index} of {self.request.id!r}")
            elif finish == "length":
                self._step(index, None, None)
                return False
        return True

    def _step(self, index, token, logprob):
        """One engine step of choice index: the committed token goes
        through GetDeltaRequestReturn (request_state.cc). token None is
        the backend's end of length; the choice must end there. Returns
        False once the choice has ended."""
        ch = self.choices[index]
        cfg = self.cfg
        with self.state.lock:
            with self.engine.lock:
                if self.state.aborted or self.preempted:
                    return False
            delta, lps, finish = [], ([] if cfg.logprobs else None), None
            if token is not None:
                ch.committed += 1
                ch.generated += 1
                delta += ch.stop.put(token)
                if lps is not None and logprob is not None:
                    lps.append(logprob)
                if ch.stop.stop_triggered:
                    finish = "stop"
                if not cfg.ignore_eos:
                    for i, t in enumerate(delta):
                        if t in cfg.stop_token_ids:
                            finish = "stop"
                            del delta[i:]
                            break
            if finish is None:
                # max_tokens counts generated tokens (MLC raises it by the
                # prompt token it commits at start_generation).
                if token is None or (cfg.max_tokens >= 0 and ch.generated >= cfg.max_tokens):
                    delta += ch.stop.finish()
                    finish = "length"
                elif len(self.prompt) + ch.committed >= self.engine.config["max_single_sequence_length"]:
                    delta += ch.stop.finish()
                    finish = "length"
            if not delta and finish is None:
                return True
            ids = [[] for _ in range(cfg.n)]
            ids[index] = delta
            logprobs = None
            if cfg.logprobs:
                logprobs = [[] for _ in range(cfg.n)]
                logprobs[index] = lps
            reasons = [None] * cfg.n
            reasons[index] = finish
            outs = [self.engine._output(self.request.id, ids, logprobs, reasons)]
            if finish is not None:
                ch.finish = finish
                self.live -= 1
                if self.live == 0:
                    outs.append(self._finished())
            self.engine.callback(outs)
            return finish is None

    def _finished(self):
        """The request's last output: its usage (ProcessFinishedRequestStateEntries)."""
        completion = sum(c.generated for c in self.choices)
        with self.engine.lock:
            self.done = True
            self.engine._erase(self.state)
            self.engine._count(len(self.prompt), completion)
            calls = list(self.state.calls)
        for call in calls:
            call.close()
        p = len(self.prompt)
        usage = {"prompt_tokens": p, "completion_tokens": completion, "total_tokens": p + completion, "extra": _request_metrics(p, completion)}
        return self.engine._usage_output(self.request.id, usage)

    def _preempt(self):
        """PreemptLastRunningRequestStateEntry in disaggregation mode: the
        whole request is aborted with finish reason "preempt"."""
        with self.state.lock:
            with self.engine.lock:
                if self.state.aborted or self.preempted or self.done:
                    return
                self.preempted = True
                self.engine._erase(self.state)
                calls = list(self.state.calls)
            for call in calls:
                call.close()
            self.engine._stream_back_error(self.request, "preempt")


def _unreserved(answer):
    err = answer.get("error") if isinstance(answer, dict) else None
    msg = err.get("message", "") if isinstance(err, dict) else ""
    return "no prep_recv reservation for user" in msg or "is not reserved for user" in msg


def _missing_kv(answer):
    err = answer.get("error") if isinstance(answer, dict) else None
    msg = err.get("message", "") if isinstance(err, dict) else ""
    return "has not been received" in msg or "is not present" in msg
