package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// requestSample is a request whose optional fields flags choose, bit by
// bit in the order of the struct's fields.
func requestSample(model, text string, ids []byte, n int, f float64, flags uint32) CompletionRequest {
	r := CompletionRequest{Model: model}
	on := func(bit int) bool { return flags&(1<<bit) != 0 }
	if on(0) {
		r.Prompt = Prompt{IsText: true, Text: text}
	} else if !on(1) {
		r.Prompt.IDs = make([]int, len(ids))
		for i, b := range ids {
			r.Prompt.IDs[i] = int(b)*n - 7
		}
	}
	if on(2) {
		r.BestOf = &n
	}
	r.Echo = on(3)
	if on(4) {
		r.FrequencyPenalty = &f
	}
	if on(5) {
		g := -f / 3
		r.PresencePenalty = &g
	}
	if on(6) {
		r.Logprobs = &n
	}
	if on(7) {
		r.MaxTokens = &n
	}
	if on(8) {
		r.N = &n
	}
	if on(9) {
		s := int64(n) << 20
		r.Seed = &s
	}
	if on(10) {
		r.Stop = StopList{text, model}
	} else if on(11) {
		r.Stop = StopList{}
	}
	r.Stream = on(12)
	if on(13) {
		r.StreamOptions = &StreamOptions{IncludeUsage: on(14)}
	}
	if on(15) {
		r.Suffix = &text
	}
	if on(16) {
		r.Temperature = &f
	}
	if on(17) {
		p := f * 1e-9
		r.TopP = &p
	}
	if on(18) {
		r.User = &model
	}
	if on(19) {
		r.LogitBias = map[string]float64{"7": f}
	} else if on(20) {
		r.LogitBias = map[string]float64{}
	}
	if on(21) {
		r.Extra = Extra{"x_new": json.RawMessage(`{"a": [1, 2], "s": "<&>` + "\u2028" + `"}`)}
	}
	if on(22) {
		r.DebugConfig = &DebugConfig{}
	} else if on(23) {
		r.DebugConfig = &DebugConfig{IgnoreEOS: true}
	}
	return r
}

func FuzzCompletionRequestAppendJSON(f *testing.F) {
	for i, s := range jsonStrings {
		f.Add("tiny", s, []byte{1, 2, 3}, i, 0.7*float64(i), uint32(i)*0x9e3779b1)
	}
	f.Add("m", "t", []byte{}, 1, 1e21, uint32(1<<16|1<<4))
	f.Add("m", "t", []byte{}, 1, 1e-7, uint32(1<<16|1<<17))
	f.Add("m", "t", []byte{}, 1, math.Inf(1), uint32(1<<16))
	f.Fuzz(func(t *testing.T, model, text string, ids []byte, n int, x float64, flags uint32) {
		r := requestSample(model, text, ids, n, x, flags)
		want, wantErr := json.Marshal(r)
		got, err := r.AppendJSON([]byte("x"))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%+v: error %v, json.Marshal's %v", r, err, wantErr)
		}
		if err == nil && (!bytes.Equal(got[1:], want) || got[0] != 'x') {
			t.Fatalf("%+v:\n got  %s\n want %s", r, got, want)
		}
	})
}

func TestCompletionRequestAppendJSONIsMarshal(t *testing.T) {
	for flags := range uint32(1 << 12) {
		for _, x := range []float64{0, 0.7, -2, 1e-7, 123456789e20, 1e21, 5e-324} {
			r := requestSample("tiny", "<stop>", []byte{0, 9}, 3, x, flags*0x9e3779b1)
			want, _ := json.Marshal(r)
			if got, err := r.AppendJSON(nil); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%+v:\n got  %s (%v)\n want %s", r, got, err, want)
			}
		}
	}
}

// The microserving requests write what their MarshalJSON writes.
func FuzzMicroservingAppendJSON(f *testing.F) {
	for i, s := range jsonStrings {
		f.Add("tiny", s, []byte{1, 2, 3}, i, 0.7*float64(i), uint32(i)*0x9e3779b1, -i, "a<b")
	}
	f.Fuzz(func(t *testing.T, model, text string, ids []byte, n int, x float64, flags uint32, m int, info string) {
		r := requestSample(model, text, ids, n, x, flags)
		for _, v := range []interface {
			json.Marshaler
			AppendJSON([]byte) ([]byte, error)
		}{
			PrepRecvRequest{CompletionRequest: r, End: m},
			RemoteSendRequest{CompletionRequest: r, Begin: n, End: m, KVAddrInfo: info, RecvRank: n ^ m},
			StartGenerateRequest{CompletionRequest: r, Begin: m},
		} {
			want, wantErr := json.Marshal(v)
			got, err := v.AppendJSON([]byte("x"))
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%T %+v: error %v, json.Marshal's %v", v, v, err, wantErr)
			}
			if err == nil && (!bytes.Equal(got[1:], want) || got[0] != 'x') {
				t.Fatalf("%T %+v:\n got  %s\n want %s", v, v, got, want)
			}
		}
	})
}
