// Package schemacorpus holds the JSON schemas structured output is
// measured on: real-world ones of the kinds clients send (Pydantic's
// and zod's models, OpenAI's and Anthropic's documented tool and
// response schemas, Kubernetes objects, draft 4 documents, configuration
// files, API payloads, function-calling tools: realworld/), and the
// schemas of the JSON Schema Test Suite's draft 2020-12 and draft 4
// cases (testsuite/, json-schema-org/JSON-Schema-Test-Suite at
// 44401e0c, MIT: testsuite/LICENSE), with their instances the suite
// says are invalid. The grammar's coverage test and the bench's -json
// -coverage run read it.
package schemacorpus

import (
	"bytes"
	"embed"
	"encoding/json"
	"io/fs"
	"path"
	"strings"
)

//go:embed realworld testsuite
var files embed.FS

// Schema is a schema of the corpus.
type Schema struct {
	// Name is where it comes from: realworld/<file> or
	// testsuite/<draft>/<file>: <description>.
	Name string
	// Text is the schema, compact.
	Text string
	// Invalid are instances the schema refuses (the suite's), compact.
	Invalid []string
	// Source is its kind: "realworld" or "testsuite".
	Source string
}

// RealWorld returns the real-world schemas, by name.
func RealWorld() []Schema {
	var out []Schema
	entries, _ := fs.ReadDir(files, "realworld")
	for _, e := range entries {
		b, _ := fs.ReadFile(files, path.Join("realworld", e.Name()))
		out = append(out, Schema{Name: "realworld/" + e.Name(), Text: compact(b), Source: "realworld"})
	}
	return out
}

// TestSuite returns the Test Suite's schemas, each with its invalid
// instances; a draft's schema without $schema is given its draft's.
func TestSuite() []Schema {
	var out []Schema
	drafts, _ := fs.ReadDir(files, "testsuite")
	for _, d := range drafts {
		if !d.IsDir() {
			continue
		}
		meta := map[string]string{"draft4": "http://json-schema.org/draft-04/schema#", "draft2020-12": "https://json-schema.org/draft/2020-12/schema"}[d.Name()]
		entries, _ := fs.ReadDir(files, path.Join("testsuite", d.Name()))
		for _, e := range entries {
			b, _ := fs.ReadFile(files, path.Join("testsuite", d.Name(), e.Name()))
			var groups []struct {
				Description string
				Schema      json.RawMessage
				Tests       []struct {
					Data  json.RawMessage
					Valid bool
				}
			}
			if json.Unmarshal(b, &groups) != nil {
				continue
			}
			for _, g := range groups {
				s := Schema{Name: "testsuite/" + d.Name() + "/" + e.Name() + ": " + g.Description, Text: withSchema(compact(g.Schema), meta), Source: "testsuite"}
				for _, t := range g.Tests {
					if !t.Valid {
						s.Invalid = append(s.Invalid, compact(t.Data))
					}
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func compact(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}

// withSchema adds "$schema": meta to an object schema without one.
func withSchema(s, meta string) string {
	if !strings.HasPrefix(s, "{") || strings.Contains(s, `"$schema"`) || meta == "" {
		return s
	}
	if s == "{}" {
		return `{"$schema":"` + meta + `"}`
	}
	return `{"$schema":"` + meta + `",` + s[1:]
}
