package main

import (
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
)

// TestMain lets the test binary be the caddy the bench runs (`run`) and
// the engines that caddy spawns (`mlc-engine`).
func TestMain(m *testing.M) { enginetest.Main(m) }
