package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// AppendJSON appends r as json.Marshal encodes it (see MarshalJSON), byte
// for byte (FuzzCompletionRequestAppendJSON), writing the fields of the
// request a router sends an engine by hand: reflection was most of the
// cost of that encoding, once per request. A request with a response
// format, a debug config, logit biases or fields this type does not
// model goes through MarshalJSON. An empty debug config, which the
// router puts on every microserving call, is written here.
func (r CompletionRequest) AppendJSON(dst []byte) ([]byte, error) {
	if r.ResponseFormat != nil || (r.DebugConfig != nil && *r.DebugConfig != DebugConfig{}) || len(r.LogitBias) > 0 || len(r.Extra) > 0 {
		b, err := json.Marshal(r)
		return append(dst, b...), err
	}
	e := objectEncoder{b: append(dst, '{')}
	if r.Model != "" {
		e.str("model", r.Model)
	}
	e.key("prompt")
	e.b = r.Prompt.appendJSON(e.b)
	e.optInt("best_of", r.BestOf)
	if r.Echo {
		e.key("echo")
		e.b = append(e.b, "true"...)
	}
	e.float("frequency_penalty", r.FrequencyPenalty)
	e.float("presence_penalty", r.PresencePenalty)
	e.optInt("logprobs", r.Logprobs)
	e.optInt("max_tokens", r.MaxTokens)
	e.optInt("n", r.N)
	if r.Seed != nil {
		e.int("seed", *r.Seed)
	}
	if len(r.Stop) > 0 {
		e.key("stop")
		e.b = appendJSONArray(e.b, r.Stop, AppendJSONString)
	}
	if r.Stream {
		e.key("stream")
		e.b = append(e.b, "true"...)
	}
	if r.StreamOptions != nil {
		e.key("stream_options")
		e.b = append(e.b, `{"include_usage":`...)
		e.b = strconv.AppendBool(e.b, r.StreamOptions.IncludeUsage)
		e.b = append(e.b, '}')
	}
	if r.Suffix != nil {
		e.str("suffix", *r.Suffix)
	}
	e.float("temperature", r.Temperature)
	e.float("top_p", r.TopP)
	if r.User != nil {
		e.str("user", *r.User)
	}
	if r.DebugConfig != nil {
		e.key("debug_config")
		e.b = append(e.b, "{}"...)
	}
	if r.Arrival != 0 {
		e.int("arrival", r.Arrival)
	}
	if e.err != nil {
		return nil, e.err
	}
	return append(e.b, '}'), nil
}

// AppendJSON appends r as MarshalJSON writes it (see appendWith).
func (r PrepRecvRequest) AppendJSON(dst []byte) ([]byte, error) {
	return r.CompletionRequest.appendWith(dst, r.MarshalJSON, func(e *objectEncoder) {
		e.int("end", int64(r.End))
	})
}

// AppendJSON appends r as MarshalJSON writes it (see appendWith).
func (r RemoteSendRequest) AppendJSON(dst []byte) ([]byte, error) {
	return r.CompletionRequest.appendWith(dst, r.MarshalJSON, func(e *objectEncoder) {
		e.int("begin", int64(r.Begin))
		e.int("end", int64(r.End))
		e.str("kv_addr_info", r.KVAddrInfo)
		e.int("recv_rank", int64(r.RecvRank))
	})
}

// AppendJSON appends r as MarshalJSON writes it (see appendWith).
func (r StartGenerateRequest) AppendJSON(dst []byte) ([]byte, error) {
	return r.CompletionRequest.appendWith(dst, r.MarshalJSON, func(e *objectEncoder) {
		e.int("begin", int64(r.Begin))
	})
}

// appendWith appends r followed by the members more writes, as
// marshalWith writes them: r's own, then the extension's in the order of
// their keys (more writes them so), then r's unknown fields. A request
// with unknown fields goes through whole, the MarshalJSON of the request
// that extends r.
func (r CompletionRequest) appendWith(dst []byte, whole func() ([]byte, error), more func(e *objectEncoder)) ([]byte, error) {
	if len(r.Extra) > 0 {
		// As json.Marshal writes a Marshaler's output: compacted, HTML
		// escaped (the unknown fields are kept as they came).
		b, err := whole()
		if err != nil {
			return nil, err
		}
		var compact, escaped bytes.Buffer
		if err := json.Compact(&compact, b); err != nil {
			return nil, err
		}
		json.HTMLEscape(&escaped, compact.Bytes())
		return append(dst, escaped.Bytes()...), nil
	}
	b, err := r.AppendJSON(dst)
	if err != nil {
		return nil, err
	}
	e := objectEncoder{b: b[:len(b)-1], comma: true} // r's closing brace goes after more's
	more(&e)
	return append(e.b, '}'), e.err
}
