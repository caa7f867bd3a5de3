// Package filelock is the lock the test helpers that install into a
// shared cache directory (npmref, mlcstack) take, so that concurrent test
// binaries never install into one directory at once.
package filelock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Dir takes a lock file next to dir, waiting for another holder's, or
// breaking it once it is older than stale (a holder that died).
func Dir(dir string, stale time.Duration) (unlock func(), err error) {
	path := filepath.Clean(dir) + ".lock"
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > stale {
			os.Remove(path)
			continue
		}
		time.Sleep(200 * time.Millisecond) // another process's install: nothing to wait on but its lock file
	}
}
