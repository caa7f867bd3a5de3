package caddymlc

import (
	"context"
	"strings"
	"testing"
)

// n choices are generated independently (and resumed independently);
// echo puts the prompt first; seeded sampling is reproducible.
func TestChoicesEchoAndSeeds(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n")
	want := reference(s, s.engines[1], greedy("the long road home", 10))

	body := greedy("the long road home", 10)
	body["n"] = 3
	got, status, raw := s.complete(s.base, body)
	if status != 200 || len(got.Choices) != 3 {
		t.Fatalf("%d %s", status, raw)
	}
	for i, c := range got.Choices {
		if c.Index != i || c.Text != want || c.Finished() != "length" {
			t.Fatalf("choice %d: %+v, want text %q", i, c, want)
		}
	}
	if got.Usage.CompletionTokens != 30 {
		t.Fatalf("usage %+v, want 30 completion tokens", got.Usage)
	}

	body = greedy("the long road home", 10)
	body["echo"] = true
	st, err := s.stream(context.Background(), s.base, body)
	if err != nil || st.text != "the long road home"+want {
		t.Fatalf("echo: %q %v", st.text, err)
	}

	sampled := func() string {
		b := map[string]any{"prompt": "the long road home", "max_tokens": 12, "temperature": 1, "seed": 42}
		r, status, raw := s.complete(s.base, b)
		if status != 200 {
			t.Fatalf("%d %s", status, raw)
		}
		return r.Choices[0].Text
	}
	a, b := sampled(), sampled()
	if a != b || strings.TrimSpace(a) == "" {
		t.Fatalf("seeded sampling differs: %q vs %q", a, b)
	}

	// Seeded choices are sampled as one engine samples n of them (MLC's
	// seed+i+1 per branch): the router's choices, each sent alone, are
	// the engine's own.
	multi := map[string]any{"prompt": "the long road home", "max_tokens": 12, "temperature": 1, "seed": 42, "n": 3}
	one, status, raw := s.complete(s.engines[1], multi)
	if status != 200 {
		t.Fatalf("engine: %d %s", status, raw)
	}
	routed, status, raw := s.complete(s.base, multi)
	if status != 200 || len(routed.Choices) != 3 {
		t.Fatalf("router: %d %s", status, raw)
	}
	for i := range routed.Choices {
		if routed.Choices[i].Text != one.Choices[i].Text {
			t.Errorf("seeded choice %d: router %q, engine %q", i, routed.Choices[i].Text, one.Choices[i].Text)
		}
	}
}
