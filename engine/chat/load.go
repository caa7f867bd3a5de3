package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Files Load reads from a model directory.
const (
	mlcChatConfigFile   = "mlc-chat-config.json"
	tokenizerConfigFile = "tokenizer_config.json"
	chatTemplateFile    = "chat_template.jinja"
)

// tokenVars are the tokenizer_config.json special tokens Load passes to a
// Jinja chat template as variables, the same list transformers.js passes.
var tokenVars = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// Load returns the chat template of the model in modelDir, in the order
// mlc_llm serve would apply them:
//
//  1. mlc-chat-config.json's conv_template object, through
//     FromConvTemplate (this is what mlc_llm serve uses);
//  2. tokenizer_config.json's chat_template (a string, or the "default"
//     entry of a list of named templates), or else a chat_template.jinja
//     file, through FromJinja with tokenizer_config.json's special tokens
//     (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
//     mask_token; each a string or an AddedToken object) as variables.
//
// A conv_template given only by name (the format of old MLC releases)
// cannot be resolved here, since the templates it names live in MLC's
// Python registry; Load then uses the Jinja template, and fails naming
// the conv_template when there is none. It also fails when neither file
// provides a template.
func Load(modelDir string) (Template, error) {
	convName := ""
	var mlc struct {
		ConvTemplate json.RawMessage `json:"conv_template"`
	}
	switch err := readJSON(filepath.Join(modelDir, mlcChatConfigFile), &mlc); {
	case err == nil:
		raw := mlc.ConvTemplate
		if len(raw) > 0 && raw[0] == '{' {
			t, err := FromConvTemplate(raw)
			if err != nil {
				return nil, fmt.Errorf("chat: %s: %w", filepath.Join(modelDir, mlcChatConfigFile), err)
			}
			return t, nil
		}
		if len(raw) > 0 && raw[0] == '"' {
			_ = json.Unmarshal(raw, &convName)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}

	src, vars, err := loadJinja(modelDir)
	if err != nil {
		return nil, err
	}
	if src == "" {
		if convName != "" {
			return nil, fmt.Errorf("chat: %s names conv_template %q, which only MLC's Python registry defines, and %s has no chat_template", mlcChatConfigFile, convName, tokenizerConfigFile)
		}
		return nil, fmt.Errorf("chat: no chat template in %s: neither %s has a conv_template nor %s a chat_template (nor is there a %s)", modelDir, mlcChatConfigFile, tokenizerConfigFile, chatTemplateFile)
	}
	t, err := FromJinja(src, vars)
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", modelDir, err)
	}
	return t, nil
}

// loadJinja returns the Jinja chat template of modelDir and its token
// variables; src is empty when there is none.
func loadJinja(modelDir string) (src string, vars map[string]any, err error) {
	path := filepath.Join(modelDir, tokenizerConfigFile)
	var cfg map[string]json.RawMessage
	if err := readJSON(path, &cfg); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	vars = make(map[string]any)
	for _, name := range tokenVars {
		if tok := tokenString(cfg[name]); tok != "" {
			vars[name] = tok
		}
	}
	if raw, ok := cfg["chat_template"]; ok {
		src, err = chatTemplateSource(raw)
		if err != nil {
			return "", nil, fmt.Errorf("chat: %s: chat_template: %w", path, err)
		}
	}
	if src == "" {
		b, err := os.ReadFile(filepath.Join(modelDir, chatTemplateFile))
		switch {
		case err == nil:
			src = string(b)
		case !errors.Is(err, fs.ErrNotExist):
			return "", nil, fmt.Errorf("chat: %w", err)
		}
	}
	return src, vars, nil
}

// chatTemplateSource decodes a chat_template value: a string, null, or a
// list of {"name", "template"} objects from which the one named
// "default" is taken.
func chatTemplateSource(raw json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == nil {
			return "", nil
		}
		return *s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("want a string or a list of named templates: %w", err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", errors.New(`no template named "default" in the list`)
}

// tokenString returns a special token given as a string or as an
// AddedToken object {"content": ...}.
func tokenString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var tok struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &tok) == nil {
		return tok.Content
	}
	return ""
}

// readJSON decodes the JSON file at path into v. A missing file is an
// error wrapping fs.ErrNotExist.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("chat: %s: %w", path, err)
	}
	return nil
}
