package engine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"

	"go.uber.org/zap"
)

const (
	// maxLogLine caps one logged line of engine output; the rest of a
	// longer line is dropped.
	maxLogLine = 16 << 10
	// tailLines is how many recent output lines an error quotes.
	tailLines = 20
)

// ring keeps the last lines of a process's output, both streams merged.
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newRing(n int) *ring { return &ring{lines: make([]string, n)} }

func (r *ring) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	r.full = r.full || r.next == 0
}

// String returns the kept lines, oldest first, joined by newlines.
func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return strings.Join(r.lines[:r.next], "\n")
	}
	return strings.Join(append(append([]string(nil), r.lines[r.next:]...), r.lines[:r.next]...), "\n")
}

// logLines reads r to EOF and logs every line with the stream name, also
// keeping it in tail. It reads continuously so that the writer never
// blocks on a full pipe; lines longer than maxLogLine are truncated.
// onLine, when not nil, is called with every line after it is logged.
func logLines(r io.Reader, stream string, logger *zap.Logger, tail *ring, onLine func(string)) {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, truncated, err := readLine(br)
		if len(line) > 0 || err == nil {
			tail.add(line)
			fields := []zap.Field{zap.String("stream", stream)}
			if truncated {
				fields = append(fields, zap.Bool("truncated", true))
			}
			logger.Info(line, fields...)
			if onLine != nil {
				onLine(line)
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine returns the next line without its line ending. A line longer
// than the reader's buffer is cut, and the remainder skipped.
func readLine(br *bufio.Reader) (line string, truncated bool, err error) {
	b, err := br.ReadSlice('\n')
	line = string(bytes.TrimRight(b, "\r\n"))
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, false, err
	}
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = br.ReadSlice('\n')
	}
	if err == io.EOF {
		err = nil // the line was logged; EOF comes on the next call
	}
	return line, true, err
}
