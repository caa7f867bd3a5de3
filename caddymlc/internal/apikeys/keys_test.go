package apikeys

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// keyLine is the keys file's line of key, named name.
func keyLine(name, key string, models ...string) string {
	sum := sha256.Sum256([]byte(key))
	b, err := json.Marshal(KeyLine{Name: name, SHA256: hex.EncodeToString(sum[:]), Models: models})
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

// The limiter holds an address past its limit for the window, logs it
// once, and holds no other address.
func TestFailureLimiterHoldsOnce(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	l := NewFailureLimiter(2, zap.New(core))
	now := time.Unix(1000, 0)
	for range 10 {
		l.Fail("10.0.0.1", now)
	}
	if _, held := l.Held("10.0.0.1", now); !held {
		t.Fatal("not held after 10 failures, limit 2")
	}
	if _, held := l.Held("10.0.0.2", now); held {
		t.Fatal("another address held")
	}
	if wait, held := l.Held("10.0.0.1", now.Add(Window-time.Second)); !held || wait != time.Second {
		t.Fatalf("held %v for %v, want 1s more", held, wait)
	}
	if _, held := l.Held("10.0.0.1", now.Add(Window)); held {
		t.Fatal("still held after the window")
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d log lines, want 1", n)
	}
	l.Fail("10.0.0.1", now.Add(2*Window))
	if _, held := l.Held("10.0.0.1", now.Add(2*Window)); held {
		t.Fatal("held after one failure in a new window")
	}
}

// A lookup compares hashes: a good key is found by its name, an
// expired one refused, a missing one said so.
func TestKeyringLookup(t *testing.T) {
	exp := time.Unix(2000, 0)
	line := strings.TrimSuffix(keyLine("old", "sk-old"), "}\n") + fmt.Sprintf(`,"expires":%q}`, exp.Format(time.RFC3339))
	var bad []int
	keys := parseKeys([]byte(keyLine("a", "sk-a")+"\n# comment\n"+line+"\n{}\n"), func(n int, _ error) { bad = append(bad, n) })
	k := &Keyring{}
	k.keys.Store(&keys)
	if got, why := k.Lookup("sk-a", exp); got.Name != "a" || why != "" {
		t.Errorf("sk-a: %q %q", got.Name, why)
	}
	if got, why := k.Lookup("sk-old", exp.Add(-time.Second)); got.Name != "old" || why != "" {
		t.Errorf("sk-old before it expires: %q %q", got.Name, why)
	}
	for key, want := range map[string]string{"sk-old": Expired, "": Missing, "sk-b": Unknown} {
		if _, why := k.Lookup(key, exp); why != want {
			t.Errorf("%q: %q, want %q", key, why, want)
		}
	}
	if fmt.Sprint(bad) != "[5]" {
		t.Errorf("bad lines %v, want [5]", bad)
	}
}

// A key made into a file is accepted at once, listed by name, and
// refused once revoked; the file keeps the lines of other names.
func TestFileKeyringCreatesAndRevokes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("# by hand\n"+keyLine("other", "sk-other")), 0o600); err != nil {
		t.Fatal(err)
	}
	k := OpenFile(path, zap.NewNop())
	defer k.Destruct()
	key, err := k.Create(t.Context(), KeyLine{Name: "team-a", Models: []string{"tiny"}})
	if err != nil || !strings.HasPrefix(key, "sk-mlc-") {
		t.Fatalf("create: %q, %v", key, err)
	}
	if got, why := k.Lookup(key, time.Now()); got.Name != "team-a" || why != "" || fmt.Sprint(got.Models) != "[tiny]" {
		t.Fatalf("the new key: %+v %q", got, why)
	}
	if n, err := k.Revoke(t.Context(), "team-a"); n != 1 || err != nil {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	if _, why := k.Lookup(key, time.Now()); why != Unknown {
		t.Fatalf("the revoked key: %q", why)
	}
	if got, _ := k.Lookup("sk-other", time.Now()); got.Name != "other" || len(k.List()) != 1 {
		t.Fatalf("the other key: %+v, %d listed", got, len(k.List()))
	}
}

// Keys made into a file (caddy mlc-key new) while others are revoked from
// it (DELETE /mlc/keys/{name}) are all kept: no writer loses another's
// edit.
func TestKeysFileConcurrentWriters(t *testing.T) {
	const n = 64
	path := filepath.Join(t.TempDir(), "keys")
	var seed strings.Builder
	for i := range n {
		seed.WriteString(keyLine(fmt.Sprintf("old-%d", i), fmt.Sprintf("sk-old-%d", i)))
	}
	if err := os.WriteFile(path, []byte(seed.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	k := OpenFile(path, zap.NewNop())
	defer k.Destruct()
	made := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key, err := NewKey(path, KeyLine{Name: fmt.Sprintf("new-%d", i)})
			if err != nil {
				t.Errorf("new-%d: %v", i, err)
			}
			made[i] = key
		})
		wg.Go(func() {
			if removed, err := k.Revoke(t.Context(), fmt.Sprintf("old-%d", i)); removed != 1 || err != nil {
				t.Errorf("revoke old-%d: %d, %v", i, removed, err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := &Keyring{}
	keys := parseKeys(b, func(line int, err error) { t.Errorf("line %d: %v", line, err) })
	got.keys.Store(&keys)
	if len(keys) != n {
		t.Errorf("%d keys in the file, want the %d made", len(keys), n)
	}
	for i, key := range made {
		if line, why := got.Lookup(key, time.Now()); why != "" || line.Name != fmt.Sprintf("new-%d", i) {
			t.Errorf("new-%d: lost (%q)", i, why)
		}
	}
}
