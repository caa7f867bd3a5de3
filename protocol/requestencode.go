package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// AppendJSON appends r as json.Marshal encodes it (see MarshalJSON), byte
// for byte (FuzzCompletionRequestAppendJSON), writing the fields of the
// request a router sends an engine by hand: reflection was most of the
// cost of that encoding, once per request. A request with a response
// format, a debug config, logit biases or fields this type does not
// model goes through MarshalJSON.
func (r CompletionRequest) AppendJSON(dst []byte) ([]byte, error) {
	if r.ResponseFormat != nil || r.DebugConfig != nil || len(r.LogitBias) > 0 || len(r.Extra) > 0 {
		b, err := json.Marshal(r)
		return append(dst, b...), err
	}
	e := objectEncoder{b: append(dst, '{')}
	if r.Model != "" {
		e.key("model")
		e.b = AppendJSONString(e.b, r.Model)
	}
	e.key("prompt")
	switch {
	case r.Prompt.IsText:
		e.b = AppendJSONString(e.b, r.Prompt.Text)
	default:
		e.b = append(e.b, '[')
		for i, id := range r.Prompt.IDs {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = strconv.AppendInt(e.b, int64(id), 10)
		}
		e.b = append(e.b, ']')
	}
	e.int("best_of", r.BestOf)
	if r.Echo {
		e.key("echo")
		e.b = append(e.b, "true"...)
	}
	e.float("frequency_penalty", r.FrequencyPenalty)
	e.float("presence_penalty", r.PresencePenalty)
	e.int("logprobs", r.Logprobs)
	e.int("max_tokens", r.MaxTokens)
	e.int("n", r.N)
	if r.Seed != nil {
		e.key("seed")
		e.b = strconv.AppendInt(e.b, *r.Seed, 10)
	}
	if len(r.Stop) > 0 {
		e.key("stop")
		e.b = append(e.b, '[')
		for i, s := range r.Stop {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = AppendJSONString(e.b, s)
		}
		e.b = append(e.b, ']')
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
		e.key("suffix")
		e.b = AppendJSONString(e.b, *r.Suffix)
	}
	e.float("temperature", r.Temperature)
	e.float("top_p", r.TopP)
	if r.User != nil {
		e.key("user")
		e.b = AppendJSONString(e.b, *r.User)
	}
	if e.err != nil {
		return nil, e.err
	}
	return append(e.b, '}'), nil
}

// objectEncoder writes the members of a JSON object.
type objectEncoder struct {
	b     []byte
	comma bool
	err   error
}

func (e *objectEncoder) key(k string) {
	if e.comma {
		e.b = append(e.b, ',')
	}
	e.comma = true
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

// int writes an optional integer member.
func (e *objectEncoder) int(k string, v *int) {
	if v != nil {
		e.key(k)
		e.b = strconv.AppendInt(e.b, int64(*v), 10)
	}
}

// float writes an optional number member as encoding/json writes a
// float64: the shortest form that reads back, with an exponent only for
// magnitudes under 1e-6 or from 1e21, written e-7 rather than e-07. NaN
// and the infinities are an error, as there.
func (e *objectEncoder) float(k string, v *float64) {
	if v == nil {
		return
	}
	f := *v
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.err = &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
		return
	}
	e.key(k)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if format == 'e' {
		if n := len(e.b); n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
			e.b[n-2] = e.b[n-1]
			e.b = e.b[:n-1]
		}
	}
}

// AppendJSON appends r as MarshalJSON writes it (see appendWith).
func (r PrepRecvRequest) AppendJSON(dst []byte) ([]byte, error) {
	return r.CompletionRequest.appendWith(dst, r.MarshalJSON, func(e *objectEncoder) {
		e.key("end")
		e.b = strconv.AppendInt(e.b, int64(r.End), 10)
	})
}

// AppendJSON appends r as MarshalJSON writes it (see appendWith).
func (r RemoteSendRequest) AppendJSON(dst []byte) ([]byte, error) {
	return r.CompletionRequest.appendWith(dst, r.MarshalJSON, func(e *objectEncoder) {
		e.key("begin")
		e.b = strconv.AppendInt(e.b, int64(r.Begin), 10)
		e.key("end")
		e.b = strconv.AppendInt(e.b, int64(r.End), 10)
		e.key("kv_addr_info")
		e.b = AppendJSONString(e.b, r.KVAddrInfo)
		e.key("recv_rank")
		e.b = strconv.AppendInt(e.b, int64(r.RecvRank), 10)
	})
}

// AppendJSON appends r as MarshalJSON writes it (see appendWith).
func (r StartGenerateRequest) AppendJSON(dst []byte) ([]byte, error) {
	return r.CompletionRequest.appendWith(dst, r.MarshalJSON, func(e *objectEncoder) {
		e.key("begin")
		e.b = strconv.AppendInt(e.b, int64(r.Begin), 10)
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
