// Package apikeys is the API keys the router accepts: a keys file of
// JSON lines (KeyLine), watched, or the cluster's Redis hash of them
// (cluster.Keys), read as a Keyring whose Lookup compares hashes in
// constant time; and the FailureLimiter that answers a client address's
// wrong keys 429 after too many of them (never its valid keys), on every
// site and replica with the cluster. The
// caddymlc adapter wires them to the mlc_router option keys, the admin
// API (/mlc/keys) and the caddy mlc-key command.
package apikeys

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/rogpeppe/go-internal/lockedfile"
)

// KeyLine is one line of a keys file (JSON lines): an API key by the
// SHA-256 of the key (hex), never the key; its name is the tenant of
// its requests.
type KeyLine struct {
	Name   string   `json:"name"`
	SHA256 string   `json:"sha256"`
	Models []string `json:"models,omitempty"`
	// Expires, when set, is when the key stops being accepted.
	Expires time.Time `json:"expires,omitzero"`
}

// key is a KeyLine read: its hash as bytes.
type key struct {
	KeyLine
	sum [sha256.Size]byte
}

// parseKeys reads a keys file: a KeyLine a line; empty lines and lines
// that begin with # are skipped; a bad line is told to bad and skipped.
func parseKeys(b []byte, bad func(line int, err error)) []key {
	var keys []key
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseKeyLine(line)
		if err != nil {
			bad(n, err)
			continue
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		bad(0, err)
	}
	return keys
}

// parseKeyLine reads one line of a keys file.
func parseKeyLine(line string) (key, error) {
	var k key
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k.KeyLine); err != nil {
		return k, fmt.Errorf("want {\"name\": ..., \"sha256\": ..., \"models\": [...], \"expires\": RFC 3339}: %w", err)
	}
	name, err := KeyName(k.Name)
	if err != nil {
		return k, err
	}
	k.Name = name
	sum, err := hex.DecodeString(k.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return k, fmt.Errorf("key %s: sha256: want 64 hex digits (the key's SHA-256, not the key)", k.Name)
	}
	copy(k.sum[:], sum)
	return k, nil
}

// maxNameBytes bounds a key's name, which is its requests' tenant.
const maxNameBytes = 256

// KeyName is name as a key holds it, without the spaces around it, or
// why it cannot be a key's name: empty, longer than 256 bytes, or with
// control characters.
func KeyName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", errors.New("the key's name is empty")
	case len(name) > maxNameBytes:
		return "", fmt.Errorf("the key's name is %d bytes long: at most %d", len(name), maxNameBytes)
	case strings.ContainsFunc(name, unicode.IsControl):
		return "", fmt.Errorf("the key's name %q has control characters", name)
	}
	return name, nil
}

// NewKey makes a random key for line's name, appends line with its
// hash to the keys file, and returns the key.
func NewKey(file string, line KeyLine) (string, error) {
	key, j, err := freshKey(&line)
	if err != nil {
		return "", err
	}
	return key, appendLine(file, j)
}

// freshKey makes a random key for line's name (KeyName), fills in its
// hash, and returns the key and the line as a keys file holds it.
func freshKey(line *KeyLine) (key string, j []byte, err error) {
	if line.Name, err = KeyName(line.Name); err != nil {
		return "", nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	key = "sk-mlc-" + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(key))
	line.SHA256 = hex.EncodeToString(sum[:])
	j, err = json.Marshal(line)
	return key, j, err
}

// lockFile takes the lock of the keys file: <file>.lock beside it,
// locked (flock, LockFileEx) by whoever edits the file, caddy mlc-key
// new and the admin API alike, so that an edit never lands between
// another's read and rename. Readers need no lock: a file is replaced
// whole, by a rename, or grows by one line.
func lockFile(file string) (unlock func(), err error) {
	return lockedfile.MutexAt(file + ".lock").Lock()
}

// appendLine appends a line to the file, created 0600, after a newline
// if its last line has none.
func appendLine(file string, line []byte) error {
	unlock, err := lockFile(file)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil {
			return err
		}
		if last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	_, err = f.Write(append(line, '\n'))
	if err != nil {
		return err
	}
	return f.Close()
}

// removeLines rewrites the keys file without the lines of name
// (through a file renamed over it, 0600), and says how many it removed.
func removeLines(path, name string) (int, error) {
	unlock, err := lockFile(path)
	if err != nil {
		return 0, err
	}
	defer unlock()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var kept bytes.Buffer
	removed := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if k, err := parseKeyLine(strings.TrimSpace(sc.Text())); err == nil && k.Name == name {
			removed++
			continue
		}
		kept.Write(sc.Bytes())
		kept.WriteByte('\n')
	}
	if err := sc.Err(); err != nil || removed == 0 {
		return 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(kept.Bytes()); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	return removed, os.Rename(tmp.Name(), path)
}
