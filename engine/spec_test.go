package engine

import (
	"errors"
	"testing"
	"time"
)

func TestSpecKey(t *testing.T) {
	eps := []Endpoint{{Host: "127.0.0.1", Port: 8080, GPUs: 1}}
	implicit := Spec{Model: "m", Program: "/bin/caddy", Endpoints: eps}
	explicit := Spec{Model: "m", Program: "/bin/caddy", Kind: KindBuiltin, UID: UIDRandom,
		PrefixCacheMode: PrefixCacheDisable, StartupTimeout: DefaultStartupTimeout,
		StopGrace: DefaultStopGrace, HealthInterval: DefaultHealthInterval, EngineArgs: []string{},
		Endpoints: []Endpoint{{Host: "127.0.0.1", Port: 8080, GPUs: 1, Role: RoleAny}}}
	if implicit.Key() != explicit.Key() {
		t.Error("defaults spelled out change the key")
	}
	if implicit.Key() != implicit.Key() {
		t.Error("key not stable")
	}
	for name, change := range map[string]func(*Spec){
		"port":        func(s *Spec) { s.Endpoints = []Endpoint{{Host: "127.0.0.1", Port: 8081, GPUs: 1}} },
		"engine args": func(s *Spec) { s.EngineArgs = []string{"-x"} },
		"timeout":     func(s *Spec) { s.StartupTimeout = time.Second },
		"model":       func(s *Spec) { s.Model = "n" },
	} {
		s := implicit
		change(&s)
		if s.Key() == implicit.Key() {
			t.Errorf("changing the %s keeps the key", name)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	eps := []Endpoint{{Host: "127.0.0.1", Port: 8080, GPUs: 1}}
	for name, s := range map[string]Spec{
		"no program":   {Model: "m", Kind: KindCommand, Endpoints: eps},
		"no model":     {Program: "p", Endpoints: eps},
		"kind":         {Model: "m", Kind: "docker", Program: "p", Endpoints: eps},
		"prefix cache": {Model: "m", Program: "p", PrefixCacheMode: "lru", Endpoints: eps},
		"endpoints":    {Model: "m", Program: "p"},
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
