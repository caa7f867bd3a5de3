package router

import (
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
)

// TestMain lets the test binary be the engine program and a second Caddy.
func TestMain(m *testing.M) { enginetest.Main(m) }
