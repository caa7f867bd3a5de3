package builtin

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	o, err := ParseArgs(strings.Fields("tiny --model-lib /x.so --device cuda:3 --enable-debug --mode server --prefix-cache-mode disable --host 0.0.0.0 --port 9000"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Model != "tiny" || o.ModelLib != "/x.so" || o.Device != "cuda:3" || !o.EnableDebug || o.Mode != "server" ||
		o.PrefixCacheMode != "disable" || o.Host != "0.0.0.0" || o.Port != 9000 {
		t.Fatalf("%+v", o)
	}
	var log strings.Builder
	o, err = ParseArgs([]string{"tiny", "--overrides", "max_total_seq_length=4096; max_num_sequence=8;prefill_chunk_size=64;prep_recv_timeout_ms=250;context_window_size=1024;gpu_memory_utilization=0.8"}, &log)
	if err != nil {
		t.Fatal(err)
	}
	ov := o.Overrides
	if ov.MaxTotalSeqLength != 4096 || ov.MaxNumSequence != 8 || ov.PrefillChunkSize != 64 || ov.PrepRecvTimeout != 250*time.Millisecond || ov.ContextWindowSize != 1024 {
		t.Fatalf("%+v", ov)
	}
	if !strings.Contains(log.String(), "gpu_memory_utilization") {
		t.Errorf("ignored override not logged: %q", log.String())
	}
	if o.Overrides.MaxNumSequence != 8 {
		t.Errorf("max_num_sequence = %d", o.Overrides.MaxNumSequence)
	}
	for mode, want := range map[string]int{"interactive": 1, "local": 4, "server": 64} {
		if o, err := ParseArgs([]string{"tiny", "--mode", mode}, io.Discard); err != nil || o.Overrides.MaxNumSequence != want {
			t.Errorf("--mode %s: max_num_sequence %d, want %d (%v)", mode, o.Overrides.MaxNumSequence, want, err)
		}
	}
	// The model may also follow the flags.
	if o, err := ParseArgs([]string{"--port", "1", "tiny"}, io.Discard); err != nil || o.Model != "tiny" {
		t.Fatalf("model after flags: %+v %v", o, err)
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, args := range []string{
		"",
		"tiny --bogus",
		"tiny --mode batch",
		"tiny --prefix-cache-mode lru",
		"tiny --device tpu",
		"tiny --port 70000",
		"tiny --overrides max_total_seq_length=-5",
		"tiny --overrides prefill_chunk_size",
		"tiny extra",
		"tiny --timing h100-nope",
		"tiny --timing h100-llama3-8b --decode-delay 1ms",
		"tiny --timing h100-llama3-8b --time-scale 0",
		"tiny --timing h100-llama3-8b --kv-link pigeon",
		"tiny --time-scale 2",
		"tiny --kv-link rdma",
		"tiny --eos-every 0",
		"tiny --timing h100-llama3-8b --eos-every -1",
	} {
		if _, err := ParseArgs(strings.Fields(args), io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("ParseArgs(%q) = %v, want a usage error", args, err)
		}
	}
}
