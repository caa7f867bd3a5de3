package cluster

import (
	"encoding/binary"
	"errors"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// The wire form of a prefix event on the bus: kind, engine address (its
// length, a uvarint, then its bytes), tokens and predicted (zigzag varints), the chain (its length, then each
// hash, 8 bytes little-endian). A chain is bounded by what a prompt can
// be (a million tokens, 65,536 pages).
const maxChainPages = 1 << 16

var errPrefixEvent = errors.New("malformed prefix event")

// appendPrefixEvent appends ev's wire form to b.
func appendPrefixEvent(b []byte, ev router.PrefixEvent) []byte {
	b = append(b, byte(ev.Kind))
	b = binary.AppendUvarint(b, uint64(len(ev.Engine)))
	b = append(b, ev.Engine...)
	b = binary.AppendVarint(b, int64(ev.Tokens))
	b = binary.AppendVarint(b, int64(ev.Predicted))
	b = binary.AppendUvarint(b, uint64(len(ev.Chain)))
	for _, h := range ev.Chain {
		b = binary.LittleEndian.AppendUint64(b, h)
	}
	return b
}

// decodePrefixEvent reads an event's wire form.
func decodePrefixEvent(b []byte) (router.PrefixEvent, error) {
	var ev router.PrefixEvent
	if len(b) < 2 {
		return ev, errPrefixEvent
	}
	ev.Kind = router.PrefixEventKind(b[0])
	if ev.Kind < router.PrefixRouted || ev.Kind > router.PrefixFinished {
		return ev, errPrefixEvent
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return ev, errPrefixEvent
	}
	b = b[1+k:]
	ev.Engine, b = string(b[:n]), b[n:]
	tokens, k := binary.Varint(b)
	if k <= 0 {
		return ev, errPrefixEvent
	}
	b = b[k:]
	predicted, k := binary.Varint(b)
	if k <= 0 {
		return ev, errPrefixEvent
	}
	b = b[k:]
	pages, k := binary.Uvarint(b)
	if k <= 0 || pages > maxChainPages || uint64(len(b)-k) != pages*8 {
		return ev, errPrefixEvent
	}
	b = b[k:]
	ev.Tokens, ev.Predicted = int(tokens), int(predicted)
	ev.Chain = make([]uint64, pages)
	for i := range ev.Chain {
		ev.Chain[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return ev, nil
}
