package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeModel makes a model directory holding files.
func writeModel(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	const jinjaConfig = `{"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
		"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}"}`
	tests := []struct {
		name  string
		files map[string]string
		want  string // prompt for [user "hi"] with the generation prompt
		err   string // substring of the error, when Load fails
	}{{
		name: "conv_template wins over chat_template",
		files: map[string]string{
			mlcChatConfigFile:   `{"model_type": "llama", "conv_template": ` + llama3Conv + `}`,
			tokenizerConfigFile: jinjaConfig,
		},
		want: "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful, respectful and honest assistant.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	}, {
		name:  "chat_template with AddedToken bos",
		files: map[string]string{tokenizerConfigFile: jinjaConfig},
		want:  "<s>user=hi;",
	}, {
		name: "named chat templates",
		files: map[string]string{tokenizerConfigFile: `{"chat_template": [
			{"name": "tool_use", "template": "tools"},
			{"name": "default", "template": "{{ messages[0].content }}!"}]}`},
		want: "hi!",
	}, {
		name: "chat_template.jinja file",
		files: map[string]string{
			tokenizerConfigFile: `{"eos_token": "</s>"}`,
			chatTemplateFile:    "{{ messages[0].content }}{{ eos_token }}",
		},
		want: "hi</s>",
	}, {
		name: "conv_template by name falls back to chat_template",
		files: map[string]string{
			mlcChatConfigFile:   `{"conv_template": "llama-2"}`,
			tokenizerConfigFile: jinjaConfig,
		},
		want: "<s>user=hi;",
	}, {
		name:  "conv_template by name alone",
		files: map[string]string{mlcChatConfigFile: `{"conv_template": "llama-2"}`},
		err:   `names conv_template "llama-2"`,
	}, {
		name:  "no template",
		files: map[string]string{mlcChatConfigFile: `{"model_type": "llama"}`, tokenizerConfigFile: `{"eos_token": "</s>"}`},
		err:   "neither",
	}, {
		name:  "empty directory",
		files: nil,
		err:   "neither",
	}, {
		name:  "broken mlc-chat-config.json",
		files: map[string]string{mlcChatConfigFile: `{`},
		err:   mlcChatConfigFile,
	}, {
		name:  "invalid conv_template",
		files: map[string]string{mlcChatConfigFile: `{"conv_template": {"seps": []}}`},
		err:   "roles is required",
	}, {
		name:  "broken chat_template",
		files: map[string]string{tokenizerConfigFile: `{"chat_template": "{% for %}"}`},
		err:   "compiling",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Load(writeModel(t, tt.files))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Load error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			got, err := tmpl.Render([]Message{user("hi")}, DefaultOptions())
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("Render = %q, want %q", got, tt.want)
			}
		})
	}
}
