package caddymlc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// docBlock is one fenced block of a page: where it starts, its language
// (what follows the opening fence) and its text.
type docBlock struct {
	file string
	line int
	lang string
	text string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (```%s)", b.file, b.line, b.lang) }

var fenceRE = regexp.MustCompile("^(\\s*)```(\\S*)")

// docBlocks returns the fenced blocks of a Markdown page (indented ones,
// in lists, too, without their indentation).
func docBlocks(file string, src []byte) []docBlock {
	var out []docBlock
	var cur *docBlock
	var indent string
	sc := bufio.NewScanner(bytes.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := fenceRE.FindStringSubmatch(line)
		switch {
		case cur == nil && m != nil:
			cur, indent = &docBlock{file: file, line: n, lang: m[2]}, m[1]
		case cur != nil && m != nil && m[2] == "":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return out
}

// checkDocBlock validates a block the way `caddy validate` does (adapt,
// then provision every module without starting anything): a Caddyfile
// (```caddyfile) or a JSON config (```json). Other languages are not
// Caddy configs; a block with none is refused, so that no config hides
// from this check untagged.
func checkDocBlock(b docBlock) error {
	var cfgJSON []byte
	switch b.lang {
	case "":
		return fmt.Errorf("a fenced block needs a language (caddyfile, json, sh, text, ...)")
	case "caddyfile":
		out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(b.text), map[string]any{"filename": b.String()})
		if err != nil {
			return fmt.Errorf("caddy adapt: %w", err)
		}
		for _, w := range warnings {
			return fmt.Errorf("caddy adapt: warning at line %d: %s", w.Line, w.Message)
		}
		cfgJSON = out
	case "json":
		cfgJSON = []byte(b.text)
	default:
		return nil
	}
	var cfg caddy.Config
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		return fmt.Errorf("not a Caddy JSON config: %w", err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		return fmt.Errorf("caddy validate: %w", err)
	}
	return nil
}

// TestDocExamples validates every Caddyfile and JSON config shown in the
// README and in docs/, as `caddy validate` would: what a reader copies
// is a whole config that Caddy accepts.
func TestDocExamples(t *testing.T) {
	pages, _ := filepath.Glob("../docs/*.md")
	pages = append(pages, "../README.md")
	configs := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range docBlocks(strings.TrimPrefix(page, "../"), src) {
			if b.lang == "caddyfile" || b.lang == "json" {
				configs++
			}
			if err := checkDocBlock(b); err != nil {
				t.Errorf("%s: %v", b, err)
			}
		}
	}
	if configs < 8 {
		t.Fatalf("found only %d configs in the pages", configs)
	}
}

// TestDocExamplesFail: a broken example, an untagged block and a fragment
// fail the check.
func TestDocExamplesFail(t *testing.T) {
	page := "text\n\n```caddyfile\n:8000 {\n\tmlc_router {\n\t\tmodel tiny\n\t\tendpont 127.0.0.1:8081\n\t}\n}\n```\n\n" +
		"```\n:8000\n```\n\n```caddyfile\nmlc_router {\n\tmodel tiny\n\tmode whole\n\tendpoint 127.0.0.1:8081\n}\n```\n\n" +
		"  ```caddyfile\n  :8000 {\n  \tmlc_router {\n  \t\tmodel tiny\n  \t}\n  }\n  ```\n"
	blocks := docBlocks("page.md", []byte(page))
	if len(blocks) != 4 {
		t.Fatalf("%d blocks: %+v", len(blocks), blocks)
	}
	wants := []string{`unknown subdirective "endpont"`, "needs a language", "caddy adapt", "needs an endpoint that can decode"}
	for i, b := range blocks {
		err := checkDocBlock(b)
		if err == nil || !strings.Contains(err.Error(), wants[i]) {
			t.Errorf("%s: error %v, want %q", b, err, wants[i])
		}
	}
}
