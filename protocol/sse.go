package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Server-sent events, as the OpenAI API and MLC-LLM use them: each event is
// "data: <json>\n\n", the stream ends with "data: [DONE]\n\n".
//
// The reader is written by hand because the standard library has none and
// the usual packages either allocate without bound on a hostile stream or
// pull in a client framework; it follows the WHATWG event-stream grammar
// for the parts a completion stream uses (data and comment lines, LF, CRLF
// and CR line ends) and ignores the rest (event, id, retry fields).

// DoneData is the data of the event that ends a stream.
const DoneData = "[DONE]"

// ErrEventTooLarge is returned when an event is larger than the reader's
// limit.
var ErrEventTooLarge = errors.New("sse: event too large")

// DefaultMaxEventBytes bounds one event when no other limit is given.
const DefaultMaxEventBytes = 1 << 20

// SSEReader reads the data of server-sent events from a stream.
type SSEReader struct {
	r          io.Reader
	buf        []byte // read from r; buf[start:end] not yet consumed
	start, end int
	err        error  // r's error, returned once buf is consumed
	line       []byte // a line that spans reads
	max        int
	data       []byte
	hasData    bool
	lastCR     bool // the previous line ended in CR: skip a following LF
}

// readBuffers recycles the readers' buffers: a router opens a stream per
// request, each reads a few hundred bytes per event.
var readBuffers = sync.Pool{New: func() any { return new([4096]byte) }}

// NewSSEReader returns a reader of events of at most maxEventBytes bytes of
// data (DefaultMaxEventBytes when 0 or less). Release gives its buffer
// back when the stream is done.
func NewSSEReader(r io.Reader, maxEventBytes int) *SSEReader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &SSEReader{r: r, buf: readBuffers.Get().(*[4096]byte)[:], max: maxEventBytes}
}

// Buffered reports whether the reader holds data it read but did not
// return yet: the next event may need no read.
func (s *SSEReader) Buffered() bool { return s.start < s.end }

// Release gives the reader's buffer back for another reader; the reader
// must not be used after.
func (s *SSEReader) Release() {
	if cap(s.buf) == 4096 {
		readBuffers.Put((*[4096]byte)(s.buf[:4096]))
	}
	s.buf, s.line, s.data = nil, nil, nil
	s.start, s.end = 0, 0
	s.err = io.ErrClosedPipe
}

// Next returns the data of the next event, its data lines joined with "\n".
// Events without data lines are skipped. At the end of the stream it
// returns io.EOF; a stream that ends inside an event returns
// io.ErrUnexpectedEOF. The returned slice is valid until the next call.
func (s *SSEReader) Next() ([]byte, error) {
	s.data = s.data[:0]
	s.hasData = false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && (s.hasData || len(line) > 0) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) == 0 {
			if s.hasData {
				return s.data, nil
			}
			continue
		}
		if e := s.field(line); e != nil {
			return nil, e
		}
	}
}

// field handles one non-empty line.
func (s *SSEReader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment
	}
	name, value, found := bytes.Cut(line, []byte(":"))
	if !found {
		value = nil
	}
	if string(name) != "data" {
		return nil
	}
	value = bytes.TrimPrefix(value, []byte(" "))
	if s.hasData {
		s.data = append(s.data, '\n')
	}
	s.hasData = true
	if len(s.data)+len(value) > s.max {
		return ErrEventTooLarge
	}
	s.data = append(s.data, value...)
	return nil
}

// readLine returns the next line without its end. A line longer than the
// event limit (plus room for the field name) is an error, so memory stays
// bounded whatever the input. It scans what one read brought for both
// line ends at once (the engine's stream is a few lines per read), and
// returns a line within the buffer without copying it: valid until the
// next call.
func (s *SSEReader) readLine() ([]byte, error) {
	limit := s.max + 64
	s.line = s.line[:0]
	spanning := false
	for {
		if s.lastCR && s.start < s.end {
			s.lastCR = false
			if s.buf[s.start] == '\n' {
				s.start++
			}
		}
		rest := s.buf[s.start:s.end]
		if i := lineEnd(rest); i >= 0 {
			s.lastCR = rest[i] == '\r'
			s.start += i + 1
			if !spanning {
				if i > limit {
					return nil, ErrEventTooLarge
				}
				return rest[:i], nil
			}
			if len(s.line)+i > limit {
				return nil, ErrEventTooLarge
			}
			s.line = append(s.line, rest[:i]...) // kept: its room serves the next lines
			return s.line, nil
		}
		if len(s.line)+len(rest) > limit {
			return nil, ErrEventTooLarge
		}
		if len(rest) > 0 {
			// A line that starts in this read and ends in a later one.
			// The usual read ends at a line end, so the next line starts
			// the next read and needs no copy.
			s.line, spanning = append(s.line, rest...), true
		}
		s.start, s.end = 0, 0
		if s.err != nil {
			if s.err == io.EOF && len(s.line) > 0 {
				return s.line, io.EOF
			}
			return nil, s.err
		}
		s.fill()
	}
}

// fill reads what r has into the empty buffer. Like bufio, it gives up
// on a reader that keeps returning nothing.
func (s *SSEReader) fill() {
	for range 100 {
		var n int
		n, s.err = s.r.Read(s.buf)
		s.end = n
		if n > 0 || s.err != nil {
			return
		}
	}
	s.err = io.ErrNoProgress
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if j := bytes.IndexByte(b, '\r'); j >= 0 && (i < 0 || j < i) {
		return j
	}
	return i
}

// IsDone reports whether the data is the end-of-stream marker.
func IsDone(data []byte) bool { return string(bytes.TrimSpace(data)) == DoneData }

// SSEWriter writes server-sent events to an HTTP response, flushing each.
type SSEWriter struct {
	w       io.Writer
	flusher http.Flusher
	buf     []byte
	frames  int64 // events and comments written
}

// ContentTypeEventStream is the media type of a server-sent event stream.
const ContentTypeEventStream = "text/event-stream"

// NewSSEWriter returns a writer on w. When w is an http.ResponseWriter, the
// event-stream headers are set (before the first write) and each event is
// flushed.
func NewSSEWriter(w io.Writer) *SSEWriter {
	// Room for a chunk of a few tokens: the buffer rarely grows.
	s := &SSEWriter{w: w, buf: make([]byte, 0, 512)}
	if rw, ok := w.(http.ResponseWriter); ok {
		h := rw.Header()
		h.Set("Content-Type", ContentTypeEventStream)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.flusher, _ = w.(http.Flusher)
		if s.flusher == nil {
			s.flusher = flusherOf(rw)
		}
	}
	return s
}

// flusherOf finds a Flusher behind wrapped response writers.
func flusherOf(w http.ResponseWriter) http.Flusher {
	rc := http.NewResponseController(w)
	return flushFunc(func() { _ = rc.Flush() })
}

type flushFunc func()

func (f flushFunc) Flush() { f() }

// WriteData writes one event with the given data, and flushes it. Data
// must not contain a line end (JSON from encoding/json never does).
func (s *SSEWriter) WriteData(data []byte) error {
	if err := s.WriteEvent(data); err != nil {
		return err
	}
	s.flush()
	return nil
}

// WriteEvent writes one event with the given data without flushing it: a
// writer that has more events at hand flushes once, after the last.
func (s *SSEWriter) WriteEvent(data []byte) error {
	if bytes.ContainsAny(data, "\r\n") {
		return fmt.Errorf("sse: event data contains a line end")
	}
	return s.writeFrame(append(append(s.buf[:0], "data: "...), data...))
}

// writeFrame ends the event buf holds ("data: " and the data, in the
// writer's buffer) and writes it, without flushing.
// WriteNamedEvent writes one event of type name (its "event:" field, as
// Anthropic's stream and OpenAI's Responses stream name theirs) with
// data, without flushing it.
func (s *SSEWriter) WriteNamedEvent(name string, data []byte) error {
	if strings.ContainsAny(name, "\r\n") || bytes.ContainsAny(data, "\r\n") {
		return fmt.Errorf("sse: event name or data contains a line end")
	}
	buf := append(append(append(s.buf[:0], "event: "...), name...), "\ndata: "...)
	return s.writeFrame(append(buf, data...))
}

func (s *SSEWriter) writeFrame(buf []byte) error {
	s.buf = append(buf, "\n\n"...)
	s.frames++
	_, err := s.w.Write(s.buf)
	return err
}

// Frames counts the events and comments written: a stream that wrote
// none for a while is silent to its client, whatever it holds back.
func (s *SSEWriter) Frames() int64 { return s.frames }

// Flush sends what was written.
func (s *SSEWriter) Flush() { s.flush() }

// WriteJSON writes v as one event, encoded into the event's own buffer,
// and flushes it. JSON from AppendJSON never holds a line end.
func (s *SSEWriter) WriteJSON(v any) error {
	buf, err := AppendJSON(append(s.buf[:0], "data: "...), v)
	if err != nil {
		return err
	}
	if err := s.writeFrame(buf); err != nil {
		return err
	}
	s.flush()
	return nil
}

// WriteDone writes the end-of-stream event.
func (s *SSEWriter) WriteDone() error { return s.WriteData([]byte(DoneData)) }

// WriteComment writes a comment line, which keeps a connection alive.
func (s *SSEWriter) WriteComment(text string) error {
	s.frames++
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.flush()
	return nil
}

func (s *SSEWriter) flush() {
	if s.flusher != nil {
		s.flusher.Flush()
	}
}
