package stopscan

import (
	"strings"
	"testing"
)

// put feeds pieces to h and returns the released text, stopping at a
// stop string.
func put(h *Handler, pieces ...string) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(strings.Join(h.Put(p), ""))
		if h.Triggered() {
			break
		}
	}
	return b.String()
}

// A caller that sees text in chunks puts a chunk as one piece: it is
// released or dropped whole, as a token is.
func TestHandlerChunks(t *testing.T) {
	h := NewHandler([]string{"ar"})
	if got := put(h, " finger clothe", " send ca", "r."); got != " finger clothe" || !h.Triggered() || h.Held() != len(" send car.") || h.StopStart() != len(" send c") {
		t.Fatalf("got %q triggered %v held %d start %d", got, h.Triggered(), h.Held(), h.StopStart())
	}
	if h.Put("more") != nil || h.Finish() != nil {
		t.Fatal("a Handler whose stop string completed took more text")
	}
}

func TestHandlerWithoutStops(t *testing.T) {
	h := NewHandler([]string{"", ""})
	if got := put(h, "a", "", "b"); got != "ab" || h.Triggered() || h.Held() != 0 || len(h.Finish()) != 0 {
		t.Fatalf("got %q", got)
	}
}

// Finish hands out what a partial match held back when the text ends
// without a stop string.
func TestHandlerFinish(t *testing.T) {
	h := NewHandler([]string{"\nuser:"})
	got := put(h, "hi", "\n", "user")
	if got != "hi" || h.Held() != len("\nuser") {
		t.Fatalf("got %q, held %d", got, h.Held())
	}
	if rest := strings.Join(h.Finish(), ""); rest != "\nuser" || h.Held() != 0 {
		t.Fatalf("Finish released %q", rest)
	}
}

// TestHandlerDropAcrossAttempts is a router resuming a generation: the
// held pieces of a failed attempt are dropped (the next attempt generates
// their text again after the released text), and matching goes on from
// the end of the released text.
func TestHandlerDropAcrossAttempts(t *testing.T) {
	t.Run("held text generated again", func(t *testing.T) {
		h := NewHandler([]string{"the end"})
		first := put(h, "it was", " the e")
		h.Drop()
		second := put(h, " the end", " of it")
		if first != "it was" || second != "" || !h.Triggered() || h.StopStart() != 1 || h.Held() != len(" the end") {
			t.Fatalf("got %q %q, triggered %v start %d held %d", first, second, h.Triggered(), h.StopStart(), h.Held())
		}
	})
	t.Run("stop begins in released text", func(t *testing.T) {
		// "xa" is released once "z" breaks the partial match of "ab";
		// "z" itself is held (it may start "zzzz"). The attempt fails,
		// "z" is dropped, and the next attempt, sampling anew, goes on
		// with "b": "ab" begins one byte before what it sent, in text the
		// client has, so nothing more goes out.
		h := NewHandler([]string{"ab", "zzzz"})
		first := put(h, "xa", "z")
		h.Drop()
		second := put(h, "b", "more")
		if first != "xa" || second != "" || !h.Triggered() || h.StopStart() != -1 || h.Held() != 1 {
			t.Fatalf("released %q then %q, triggered %v start %d held %d", first, second, h.Triggered(), h.StopStart(), h.Held())
		}
	})
	t.Run("no match across the boundary", func(t *testing.T) {
		h := NewHandler([]string{"ab"})
		first := put(h, "xa", "c")
		h.Drop()
		second := put(h, "c", "d")
		second += strings.Join(h.Finish(), "")
		if first+second != "xaccd" || h.Triggered() {
			t.Fatalf("got %q %q", first, second)
		}
	})
}

// What a Handler keeps does not grow with the text: the held pieces are
// those a partial match overlaps, the remembered ones cover the longest
// stop string.
func TestHandlerBoundedState(t *testing.T) {
	h := NewHandler([]string{"abcdefgh", "xyz"})
	for range 100000 {
		h.Put("abcdefg")
		h.Put(" ")
		if h.Triggered() || len(h.held) > 1 || h.recentLen > 7+len("abcdefg") {
			t.Fatalf("state grew: %d held, %d remembered bytes", len(h.held), h.recentLen)
		}
	}
}

func BenchmarkHandlerPut(b *testing.B) {
	h := NewHandler([]string{"the end", "\n\n", "STOP"})
	for b.Loop() {
		h.Put(" the")
	}
}
