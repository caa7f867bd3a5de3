package cluster

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// A key put through one replica's connection is read through another's,
// and gone from both once deleted.
func TestKeysAreSharedAndDeleted(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newTestConn(t, srv.Addr(), nil), newTestConn(t, srv.Addr(), nil)
	waitUp(t, a, true, 5*time.Second)
	ka, kb := NewKeys(a), NewKeys(b)
	ctx := context.Background()
	if err := ka.Put(ctx, "aa", []byte(`{"name":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if err := ka.Put(ctx, "bb", []byte(`{"name":"y"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := kb.Lines(ctx)
	if want := map[string]string{"aa": `{"name":"x"}`, "bb": `{"name":"y"}`}; err != nil || !maps.Equal(got, want) {
		t.Fatalf("lines read through the other connection: %v, %v", got, err)
	}
	if err := kb.Delete(ctx, "aa"); err != nil {
		t.Fatal(err)
	}
	if err := kb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := ka.Lines(ctx); err != nil || len(got) != 1 || got["bb"] == "" {
		t.Fatalf("after deleting aa: %v, %v", got, err)
	}
}
