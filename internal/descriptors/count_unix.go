//go:build unix

package descriptors

import (
	"math"
	"os"
	"syscall"
)

// Count counts the process's open descriptors (/proc/self/fd)
// and reads its soft limit.
func Count() (open, limit int, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	limit = int(min(rl.Cur, uint64(math.MaxInt32)))
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, limit, err
	}
	return len(entries), limit, nil
}
