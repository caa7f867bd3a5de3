package engine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
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

// maxOutputPanics is how many panics an output stream survives before it
// is drained without logging.
const maxOutputPanics = 3

// output logs one output stream of a process, line by line.
type output struct {
	log    func() *zap.Logger // called for every line: the logger may change
	stream string             // "stdout" or "stderr"
	pid    int
	tail   *ring
	onLine func(string) // when not nil, called with every line after it is logged
}

// pump reads r to EOF, logging every line with the stream name and keeping
// it in the tail. It reads continuously so that the writer never blocks on
// a full pipe, even when logging a line panics: the panic is logged and
// the next line read; after maxOutputPanics the rest is drained unlogged.
func (o *output) pump(r io.Reader) {
	br := bufio.NewReaderSize(r, maxLogLine)
	for range maxOutputPanics {
		if !goroutine.Call(o.log, "engine output reader", func() { o.copy(br) }) {
			return
		}
	}
	o.log().Error("engine output reader panicked too often; discarding the rest of the stream",
		zap.Int("pid", o.pid), zap.String("stream", o.stream))
	_, _ = io.Copy(io.Discard, br)
}

// copy logs the lines of br until EOF or a read error. Lines longer than
// maxLogLine are truncated.
func (o *output) copy(br *bufio.Reader) {
	for {
		line, truncated, err := readLine(br)
		if len(line) > 0 || err == nil {
			o.line(line, truncated)
		}
		if err != nil {
			return
		}
	}
}

// line logs one line at its level (see lineLevel). The check comes first,
// so that a disabled level costs no fields.
func (o *output) line(line string, truncated bool) {
	o.tail.add(line)
	if ce := o.log().Check(lineLevel(line), line); ce != nil {
		fields := []zap.Field{zap.Int("pid", o.pid), zap.String("stream", o.stream)}
		if truncated {
			fields = append(fields, zap.Bool("truncated", true))
		}
		ce.Write(fields...)
	}
	if o.onLine != nil {
		o.onLine(line)
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
