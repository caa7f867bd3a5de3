package builtin

import (
	"io"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// How long a sequence may be, as MLC bounds it. MLC's engine config has
// max_single_sequence_length, the model's context_window_size
// (mlc-chat-config.json, or --overrides context_window_size), and its
// Python front end takes min(that, max_total_sequence_length) as the
// input limit (engine_base.py, max_input_sequence_length):
//
//   - a longer prompt is a 400 (engine_utils.check_and_get_prompts_length);
//   - a prompt of the single-sequence limit or more gets no text, finish
//     reason "length" and a usage of zeros (engine.cc AddRequest,
//     StreamBackError), since no token fits after it;
//   - a generation ends with "length" once prompt and generated tokens
//     reach it (request_state.cc, GetDeltaRequestReturn), whatever
//     max_tokens says: max_tokens is never checked against the context,
//     and without one a generation runs to it.
//
// The built-in engine's single-sequence limit is context_window_size
// bounded by max_total_seq_length, since its KV cache holds no longer
// sequence; the input limit is then the same number.

// codeContextLength is the error code of a prompt that does not fit the
// engine's context, as OpenAI names it.
const codeContextLength = protocol.CodeContextLengthExceeded

// contextWindow returns the context_window_size of opts: the override,
// else a timed engine's profile's model's, else the model directory's
// mlc-chat-config.json's (a missing file or field, or -1, is none), else
// 0 for none.
func contextWindow(opts *Options) (int, error) {
	if n := opts.Overrides.ContextWindowSize; n > 0 {
		return n, nil
	}
	if opts.Timing != nil {
		return opts.Timing.Model.Context, nil
	}
	if opts.Model == TinyModel {
		return 0, nil
	}
	return chat.ContextWindow(opts.Model)
}

// sequenceLimit is the most tokens one sequence holds, prompt included:
// the context window, if any, within the KV cache's capacity.
func sequenceLimit(opts *Options, window int) int {
	if window > 0 {
		return min(window, opts.Overrides.MaxTotalSeqLength)
	}
	return opts.Overrides.MaxTotalSeqLength
}

// checkPromptLength refuses a prompt of n tokens longer than the input
// limit, as MLC does, in its words; param names the request field the
// prompt comes from.
func (e *Engine) checkPromptLength(n int, param string) *protocol.Error {
	if n <= e.maxSeq {
		return nil
	}
	return protocol.InvalidRequest(param, "Request prompt has %d tokens in total, larger than the model input length limit %d.", n, e.maxSeq).
		WithCode(codeContextLength)
}

// noRoom reports whether a prompt of n tokens leaves no room for a token:
// MLC answers it at once, with no text and finish reason "length".
func (e *Engine) noRoom(n int) bool { return n >= e.maxSeq }

// SequenceLimit returns the most tokens one sequence may hold on an
// engine started with args (`<model> [flags]`, as the fleet starts it):
// what a router in front of it refuses beyond.
func SequenceLimit(args []string) (int, error) {
	opts, err := ParseArgs(args, io.Discard)
	if err != nil {
		return 0, err
	}
	window, err := contextWindow(opts)
	if err != nil {
		return 0, err
	}
	return sequenceLimit(opts, window), nil
}

// Limits answers what the fleet asks of the built-in engine's command
// line (engine.BuiltinLimits), from the engine's own reading of it.
type Limits struct{}

// SequenceLimit is SequenceLimit's, 0 for a command line it refuses.
func (Limits) SequenceLimit(args []string) int {
	n, err := SequenceLimit(args)
	if err != nil {
		return 0
	}
	return n
}

// Batch is the max_num_sequence of the command line, 0 for one it
// refuses.
func (Limits) Batch(args []string) int {
	o, err := ParseArgs(args, io.Discard)
	if err != nil {
		return 0
	}
	return o.Overrides.MaxNumSequence
}

// Embedding is the vector size and input bound of the embedding model
// the engine loads for --embedding-model model, 0, 0 for one it cannot.
func (Limits) Embedding(model, lib string) (dim, maxTokens int) {
	// The command line needs a model of its own, which the embedding
	// model's bounds do not depend on.
	args := []string{TinyModel, "--embedding-model", model}
	if lib != "" {
		args = append(args, "--embedding-model-lib", lib)
	}
	info, err := EmbeddingModelInfo(args)
	if err != nil || info == nil {
		return 0, 0
	}
	return info.Dim, info.MaxTokens
}
