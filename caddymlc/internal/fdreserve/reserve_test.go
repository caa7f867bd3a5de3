package fdreserve

import (
	"errors"
	"io"
	"testing"
)

// spare is a spare descriptor that knows whether it is open.
type spare struct{ open *int }

func (s spare) Close() error { *s.open--; return nil }

// A reserve holds one spare per listener, lets one go to accept a
// client, and takes it back only while the process has a descriptor to
// spare; removing a listener gives its spare back.
func TestReserveLendsAndTakesBack(t *testing.T) {
	open, full := 0, false
	r := &Reserve{open: func() (io.Closer, error) {
		if full {
			return nil, errors.New("EMFILE")
		}
		open++
		return spare{&open}, nil
	}}
	first, second := r.add(), r.add()
	if !first || !second || open != 2 {
		t.Fatalf("two listeners: %d spares open", open)
	}
	if !r.borrow() || open != 1 {
		t.Fatalf("after a borrow: %d spares open", open)
	}
	full = true
	if r.refill() || open != 1 {
		t.Fatalf("a refill with no descriptor free: %d spares open", open)
	}
	full = false
	if !r.refill() || open != 2 {
		t.Fatalf("a refill with descriptors free: %d spares open", open)
	}
	r.remove()
	r.remove()
	if open != 0 || r.borrow() {
		t.Fatalf("every listener gone: %d spares open", open)
	}
}
