package mlcstack

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
)

// ContextWindow is the model's context_window_size in mlc-chat-config.json:
// the built-in engine's default max_total_seq_length.
const ContextWindow = 16384

// TinyConvTemplate is the conversation template of the model directory: the
// built-in tiny template of the router (engine/chat Tiny: "role: text\n"
// turns, "assistant:" to generate, "\nuser:" to stop) in MLC's Conversation
// form. MLC renders a system message with its system_template, always, so
// the two agree on conversations without one.
var TinyConvTemplate = map[string]any{
	"name":             "caddy-mlc-tiny",
	"system_template":  "{system_message}",
	"system_message":   "",
	"roles":            map[string]string{"user": "user", "assistant": "assistant", "tool": "tool"},
	"role_templates":   map[string]string{},
	"seps":             []string{"\n"},
	"role_content_sep": ": ",
	"role_empty_sep":   ":",
	"stop_str":         []string{"\nuser:"},
	"stop_token_ids":   tiny.New().EOSTokenIDs(),
}

// WriteModel writes an MLC model directory for the built-in tiny model
// into dir: mlc-chat-config.json, the vocabulary the stand-in tokenizer
// reads (standin-tokenizer.json: every token's bytes by id, the special
// tokens, EOS, the first byte token and the first piece token) and a
// placeholder model library (MLC checks that --model-lib is a file; the
// stand-in loads none). It returns the library's path.
func WriteModel(dir string) (modelLib string, err error) {
	tok := tiny.New()
	vocab := tok.VocabSize()
	tokens := make([][]int, vocab)
	firstPiece, firstByte := -1, -1
	for id := range vocab {
		s := tok.Token(id)
		tokens[id] = make([]int, len(s))
		for i := range len(s) {
			tokens[id][i] = int(s[i])
		}
		if firstByte < 0 && s == "\x00" {
			firstByte = id
		}
		if firstPiece < 0 && id != tiny.EOS && tok.Generatable(id) {
			firstPiece = id
		}
	}
	files := map[string]any{
		"standin-tokenizer.json": map[string]any{
			"tokens":        tokens,
			"special":       map[string]string{"0": "<s>", "1": "</s>"},
			"eos_token_ids": tok.EOSTokenIDs(),
			"first_byte":    firstByte,
			"first_piece":   firstPiece,
		},
		"mlc-chat-config.json": map[string]any{
			"version":                  "0.1.0",
			"model_type":               "caddy-mlc-tiny",
			"quantization":             "none",
			"model_config":             map[string]any{},
			"vocab_size":               vocab,
			"context_window_size":      ContextWindow,
			"sliding_window_size":      -1,
			"prefill_chunk_size":       512,
			"attention_sink_size":      0,
			"tensor_parallel_shards":   1,
			"pipeline_parallel_stages": 1,
			"temperature":              1.0,
			"presence_penalty":         0.0,
			"frequency_penalty":        0.0,
			"repetition_penalty":       1.0,
			"top_p":                    1.0,
			"tokenizer_files":          []string{"standin-tokenizer.json"},
			"tokenizer_info":           map[string]any{"token_postproc_method": "byte_level", "prepend_space_in_encode": false, "strip_space_in_decode": false},
			"conv_template":            TinyConvTemplate,
			"pad_token_id":             tiny.BOS,
			"bos_token_id":             tiny.BOS,
			"eos_token_id":             tiny.EOS,
		},
	}
	for name, v := range files {
		b, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	modelLib = filepath.Join(dir, "standin-model-lib.so")
	return modelLib, os.WriteFile(modelLib, nil, 0o644)
}
