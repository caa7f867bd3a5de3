package protocol

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r io.Reader, max int) ([]string, error) {
	t.Helper()
	s := NewSSEReader(r, max)
	var out []string
	for {
		d, err := s.Next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, string(d))
	}
}

func TestSSEReaderFraming(t *testing.T) {
	stream := ": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata:{\"b\":2}\n\ndata: line1\ndata: line2\n\nid: 3\n\ndata: [DONE]\r\r"
	want := []string{`{"a":1}`, `{"b":2}`, "line1\nline2", "[DONE]"}
	for _, r := range []io.Reader{
		strings.NewReader(stream),
		iotest.OneByteReader(strings.NewReader(stream)),
		iotest.HalfReader(strings.NewReader(stream)),
	} {
		got, err := readAll(t, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("got %q want %q", got, want)
		}
	}
	if !IsDone([]byte(want[3])) {
		t.Fatal("[DONE] not recognised")
	}
}

func TestSSEReaderSplitAtEveryByte(t *testing.T) {
	stream := "data: {\"x\":\"\u00e9\"}\r\n\r\ndata: [DONE]\n\n"
	for i := 0; i <= len(stream); i++ {
		r := io.MultiReader(strings.NewReader(stream[:i]), strings.NewReader(stream[i:]))
		got, err := readAll(t, r, 0)
		if err != nil || len(got) != 2 || got[0] != "{\"x\":\"\u00e9\"}" {
			t.Fatalf("split at %d: %q %v", i, got, err)
		}
	}
}

func TestSSEReaderLongLinesAndLimits(t *testing.T) {
	long := strings.Repeat("x", 200000)
	got, err := readAll(t, strings.NewReader("data: "+long+"\n\n"), 300000)
	if err != nil || len(got) != 1 || got[0] != long {
		t.Fatalf("long line: %v", err)
	}
	_, err = readAll(t, strings.NewReader("data: "+long+"\n\n"), 1000)
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
	many := strings.Repeat("data: aaaaaaaaaa\n", 1000) + "\n"
	_, err = readAll(t, strings.NewReader(many), 1000)
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("many data lines: err = %v", err)
	}
	_, err = readAll(t, strings.NewReader(strings.Repeat(":", 5000)+"\n"), 100)
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("long comment: err = %v", err)
	}
}

func TestSSEReaderTruncated(t *testing.T) {
	_, err := readAll(t, strings.NewReader("data: {\"a\":1}\n"), 0)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("err = %v", err)
	}
}

func TestSSEWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewSSEWriter(rec)
	if err := w.WriteJSON(map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	_ = w.WriteComment("ping")
	_ = w.WriteDone()
	if err := w.WriteData([]byte("a\nb")); err == nil {
		t.Fatal("data with a newline accepted")
	}
	if rec.Header().Get("Content-Type") != "text/event-stream" || !rec.Flushed {
		t.Fatalf("headers %v flushed %v", rec.Header(), rec.Flushed)
	}
	got, err := readAll(t, bytes.NewReader(rec.Body.Bytes()), 0)
	if err != nil || len(got) != 2 || got[0] != `{"a":1}` || got[1] != DoneData {
		t.Fatalf("%q %v", got, err)
	}
}
