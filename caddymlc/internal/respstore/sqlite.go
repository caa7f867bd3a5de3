package respstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// DefaultTTL is how long a response is kept by default: OpenAI keeps
// stored responses 30 days.
const DefaultTTL = 30 * 24 * time.Hour

// purgeEvery bounds how often a Put deletes the expired records: the
// cost of expiry is spread over writes, with no goroutine of its own.
const purgeEvery = time.Minute

// SQLite is a response store in an SQLite file.
type SQLite struct {
	db  *sql.DB
	ttl atomic.Int64 // nanoseconds

	purgeMu   sync.Mutex
	lastPurge time.Time
	now       func() time.Time // time.Now; tests move it
}

const schema = `
CREATE TABLE IF NOT EXISTS responses (
	tenant     TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	record     BLOB    NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS responses_expiry ON responses (expires_at);`

// Open opens (creating it and its directory if needed) the store at
// path, keeping each response ttl (DefaultTTL when 0 or less).
func Open(path string, ttl time.Duration) (*SQLite, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("responses store: %w", err)
	}
	if err := private(path); err != nil {
		return nil, fmt.Errorf("responses store: %w", err)
	}
	// WAL lets readers read while one writes; busy_timeout makes a
	// writer wait for another (another Caddy on the same file) rather
	// than fail.
	q := url.Values{"_pragma": {"journal_mode(WAL)", "busy_timeout(5000)", "synchronous(NORMAL)"}}
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("responses store %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("responses store %s: %w", path, err)
	}
	s := &SQLite{db: db, now: time.Now}
	s.SetTTL(ttl)
	return s, nil
}

// private creates the file at path readable by its owner only (0600), or
// makes an existing one so: it holds conversations. SQLite creates its
// WAL and shared-memory files with the database file's mode.
func private(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return f.Chmod(st.Mode().Perm() &^ 0o077)
	}
	return nil
}

// SetTTL sets how long responses stored from now on are kept
// (DefaultTTL when 0 or less).
func (s *SQLite) SetTTL(ttl time.Duration) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	s.ttl.Store(int64(ttl))
}

// Put keeps record as the response id of tenant for the TTL, replacing
// any; now and then it deletes the expired records first.
func (s *SQLite) Put(ctx context.Context, tenant, id string, record []byte) error {
	now := s.now()
	if err := s.purge(ctx, now); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO responses (tenant, id, record, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, id) DO UPDATE SET record = excluded.record, expires_at = excluded.expires_at`,
		tenant, id, record, now.Add(time.Duration(s.ttl.Load())).UnixNano())
	return err
}

// Get returns the record of the response id of tenant, unless it expired.
func (s *SQLite) Get(ctx context.Context, tenant, id string) ([]byte, bool, error) {
	var record []byte
	err := s.db.QueryRowContext(ctx, `SELECT record FROM responses WHERE tenant = ? AND id = ? AND expires_at > ?`,
		tenant, id, s.now().UnixNano()).Scan(&record)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	return record, err == nil, err
}

// Delete forgets the response id of tenant; deleted is false when there
// was none (or it had expired).
func (s *SQLite) Delete(ctx context.Context, tenant, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM responses WHERE tenant = ? AND id = ? AND expires_at > ?`, tenant, id, s.now().UnixNano())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// purge deletes the expired records, at most once per purgeEvery.
func (s *SQLite) purge(ctx context.Context, now time.Time) error {
	s.purgeMu.Lock()
	due := now.Sub(s.lastPurge) >= purgeEvery
	if due {
		s.lastPurge = now
	}
	s.purgeMu.Unlock()
	if !due {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `DELETE FROM responses WHERE expires_at <= ?`, now.UnixNano())
	return err
}

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }
