package respstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// A record reads back for its tenant only, survives a reopening of the
// file, is replaced by a Put of the same id, and is gone once deleted.
func TestPutGetDelete(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "responses.db")
	s, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "alice", "resp_1", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.Get(ctx, "bob", "resp_1"); found || err != nil {
		t.Fatalf("bob reads alice's: %v %v", found, err)
	}
	if deleted, err := s.Delete(ctx, "bob", "resp_1"); deleted || err != nil {
		t.Fatalf("bob deletes alice's: %v %v", deleted, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, 0); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, found, err := s.Get(ctx, "alice", "resp_1"); !found || err != nil || string(b) != `{"v":1}` {
		t.Fatalf("after reopening: %s %v %v", b, found, err)
	}
	if err := s.Put(ctx, "alice", "resp_1", []byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := s.Get(ctx, "alice", "resp_1"); string(b) != `{"v":2}` {
		t.Fatalf("replaced: %s", b)
	}
	if deleted, err := s.Delete(ctx, "alice", "resp_1"); !deleted || err != nil {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if _, found, _ := s.Get(ctx, "alice", "resp_1"); found {
		t.Fatal("deleted, still found")
	}
	if deleted, _ := s.Delete(ctx, "alice", "resp_1"); deleted {
		t.Fatal("deleted twice")
	}
}

// A record is forgotten once its TTL has passed, and a later Put purges
// it from the file.
func TestTTL(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "responses.db"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Unix(1_000_000, 0)
	s.now = func() time.Time { return now }
	if err := s.Put(ctx, "", "resp_old", []byte("old")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Minute)
	if _, found, _ := s.Get(ctx, "", "resp_old"); !found {
		t.Fatal("forgotten before its TTL")
	}
	now = now.Add(2 * time.Minute)
	if _, found, _ := s.Get(ctx, "", "resp_old"); found {
		t.Fatal("kept past its TTL")
	}
	if deleted, _ := s.Delete(ctx, "", "resp_old"); deleted {
		t.Fatal("an expired record deleted")
	}
	if err := s.Put(ctx, "", "resp_new", []byte("new")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM responses`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d records after the purge (%v), want 1", n, err)
	}
}
