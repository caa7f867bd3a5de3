package engine

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSpecKey(t *testing.T) {
	eps := []Endpoint{{Host: "127.0.0.1", Port: 8080, GPUs: 1}, {Host: "127.0.0.1", Port: 8081, GPUs: 2}}
	implicit := Spec{Model: "m", Program: "/bin/caddy", Endpoints: eps}
	explicit := Spec{Model: "m", Program: "/bin/caddy", Kind: KindBuiltin, UID: UIDRandom,
		PrefixCacheMode: PrefixCacheRadix, StartupTimeout: DefaultStartupTimeout,
		StopGrace: DefaultStopGrace, HealthInterval: DefaultHealthInterval, HangTimeout: DefaultHangTimeout,
		EngineArgs: []string{}, Args: []string{},
		Endpoints: []Endpoint{{Host: "127.0.0.1", Port: 8080, GPUs: 1, Role: RoleAny}, {Host: "127.0.0.1", Port: 8081, GPUs: 2, Role: RoleAny}}}
	if implicit.Key() != explicit.Key() {
		t.Error("defaults spelled out change the key")
	}
	if again := implicit; implicit.Key() != again.Key() {
		t.Error("key not stable")
	}
	// A fleet without an embedding model keeps the key it had before
	// specs could name one: a reload into this version keeps its engines.
	if b, _ := json.Marshal(implicit.Normalize().identity()); strings.Contains(string(b), "embedding") {
		t.Errorf("identity %s names an embedding model", b)
	}
	// What a reload may change on running engines.
	for name, change := range map[string]func(*Spec){
		"roles":           func(s *Spec) { s.Endpoints[0].Role, s.Endpoints[1].Role = RolePrefill, RoleDecode },
		"startup timeout": func(s *Spec) { s.StartupTimeout = time.Second },
		"stop grace":      func(s *Spec) { s.StopGrace = time.Second },
		"health interval": func(s *Spec) { s.HealthInterval = time.Second },
		"hang timeout":    func(s *Spec) { s.HangTimeout = time.Second },
	} {
		s := implicit
		s.Endpoints = slices.Clone(eps)
		change(&s)
		if s.Key() != implicit.Key() {
			t.Errorf("changing the %s changes the key: the reload would start a second fleet on the same ports", name)
		}
	}
	// What defines the processes.
	for name, change := range map[string]func(*Spec){
		"kind":            func(s *Spec) { s.Kind = KindCommand },
		"program":         func(s *Spec) { s.Program = "/bin/other" },
		"args":            func(s *Spec) { s.Args = []string{"-v"} },
		"model":           func(s *Spec) { s.Model = "n" },
		"model lib":       func(s *Spec) { s.ModelLib = "lib.so" },
		"embedding model": func(s *Spec) { s.EmbeddingModel = "tiny-embed" },
		"embedding model lib": func(s *Spec) {
			s.EmbeddingModel, s.EmbeddingModelLib = "tiny-embed", "embed.so"
		},
		"engine args":   func(s *Spec) { s.EngineArgs = []string{"-x"} },
		"prefix cache":  func(s *Spec) { s.PrefixCacheMode = PrefixCacheDisable },
		"uid source":    func(s *Spec) { s.UID = UIDNVSHMEM },
		"host":          func(s *Spec) { s.Endpoints[1].Host = "localhost" },
		"port":          func(s *Spec) { s.Endpoints[1].Port = 8082 },
		"gpus":          func(s *Spec) { s.Endpoints[1].GPUs = 1 },
		"external":      func(s *Spec) { s.Endpoints[1].External = true },
		"endpoint":      func(s *Spec) { s.Endpoints = s.Endpoints[:1] },
		"endpoint swap": func(s *Spec) { s.Endpoints[0], s.Endpoints[1] = s.Endpoints[1], s.Endpoints[0] },
	} {
		s := implicit
		s.Endpoints = slices.Clone(eps)
		change(&s)
		if s.Key() == implicit.Key() {
			t.Errorf("changing the %s keeps the key", name)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	eps := []Endpoint{{Host: "127.0.0.1", Port: 8080, GPUs: 1}}
	for name, s := range map[string]Spec{
		"no program":                  {Model: "m", Kind: KindCommand, Endpoints: eps},
		"no model":                    {Program: "p", Endpoints: eps},
		"kind":                        {Model: "m", Kind: "docker", Program: "p", Endpoints: eps},
		"prefix cache":                {Model: "m", Program: "p", PrefixCacheMode: "lru", Endpoints: eps},
		"endpoints":                   {Model: "m", Program: "p"},
		"embedding lib without model": {Model: "m", Program: "p", EmbeddingModelLib: "e.so", Endpoints: eps},
		"mlc embedding without lib":   {Model: "m", Kind: KindMLC, EmbeddingModel: "dist/e", Endpoints: eps},
	} {
		if err := s.Normalize().Validate(); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: err = %v, want ErrInvalidSpec", name, err)
		}
		if _, err := New(s, Options{}); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: New err = %v, want ErrInvalidSpec", name, err)
		}
	}
	external := Spec{Endpoints: []Endpoint{{Host: "h", Port: 1, GPUs: 1, External: true}}}
	if err := external.Normalize().Validate(); err != nil {
		t.Errorf("all-external fleet without model or program: %v", err)
	}
	for name, s := range map[string]Spec{
		"builtin embedding model without lib": {Model: "m", Program: "p", EmbeddingModel: "tiny-embed", Endpoints: eps},
		"mlc embedding model with lib":        {Model: "m", Kind: KindMLC, EmbeddingModel: "dist/e", EmbeddingModelLib: "e.so", Endpoints: eps},
		"command embedding model without lib": {Model: "m", Kind: KindCommand, Program: "p", EmbeddingModel: "dist/e", Endpoints: eps},
	} {
		if err := s.Normalize().Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLocalGPUsNeeded(t *testing.T) {
	s := Spec{Endpoints: []Endpoint{
		{Host: "h", Port: 1, GPUs: 2},
		{Host: "h", Port: 2, GPUs: 1},
		{Host: "remote", Port: 3, GPUs: 4, External: true},
	}}
	if got := s.LocalGPUsNeeded(); got != 3 {
		t.Errorf("LocalGPUsNeeded = %d, want 3", got)
	}
}
