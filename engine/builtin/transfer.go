package builtin

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// PathKVTransfer is the internal endpoint through which a prefill engine
// writes keys and values into a decode engine's KV slots.
const PathKVTransfer = "/microserving/kv_transfer"

// transferMagic starts every transfer body.
const transferMagic = "MLCKV001"

// transfer is a decoded kv_transfer body. Its wire form, little-endian:
//
//	magic "MLCKV001" | fingerprint u64 | layers u32 | dim u32 |
//	begin u32 | count u32 | len(user) u32 | user |
//	count slots u32 | count x layers x (key, value) x dim float32
//
// Slot j receives token position begin+j.
type transfer struct {
	fingerprint uint64
	layers, dim int
	user        string
	begin       int
	slots       []int
	data        []byte
}

// encode returns the wire form.
func (t *transfer) encode() []byte {
	var b bytes.Buffer
	b.WriteString(transferMagic)
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	w(t.fingerprint)
	w(uint32(t.layers))
	w(uint32(t.dim))
	w(uint32(t.begin))
	w(uint32(len(t.slots)))
	w(uint32(len(t.user)))
	b.WriteString(t.user)
	for _, s := range t.slots {
		w(uint32(s))
	}
	b.Write(t.data)
	return b.Bytes()
}

// decodeTransfer parses a wire form.
func decodeTransfer(b []byte) (*transfer, error) {
	r := bytes.NewReader(b)
	magic := make([]byte, len(transferMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != transferMagic {
		return nil, fmt.Errorf("not a KV transfer body")
	}
	var h struct {
		Fingerprint                       uint64
		Layers, Dim, Begin, Count, UserLn uint32
	}
	if err := binary.Read(r, binary.LittleEndian, &h); err != nil {
		return nil, fmt.Errorf("KV transfer header: %w", err)
	}
	if int64(h.UserLn) > int64(r.Len()) || int64(h.Count)*4 > int64(r.Len()) {
		return nil, fmt.Errorf("KV transfer body is truncated")
	}
	t := &transfer{fingerprint: h.Fingerprint, layers: int(h.Layers), dim: int(h.Dim), begin: int(h.Begin)}
	user := make([]byte, h.UserLn)
	_, _ = io.ReadFull(r, user)
	t.user = string(user)
	raw := make([]uint32, h.Count)
	if err := binary.Read(r, binary.LittleEndian, raw); err != nil {
		return nil, fmt.Errorf("KV transfer slots: %w", err)
	}
	for _, s := range raw {
		t.slots = append(t.slots, int(s))
	}
	t.data = b[len(b)-r.Len():]
	if want := int64(h.Count) * int64(h.Layers) * 2 * int64(h.Dim) * 4; int64(len(t.data)) != want {
		return nil, fmt.Errorf("KV transfer data: %d bytes, want %d", len(t.data), want)
	}
	return t, nil
}

// sendKV posts a transfer to the engine at addr and waits for its
// acknowledgement that the data landed.
func sendKV(ctx context.Context, client *http.Client, addr string, t *transfer) *protocol.Error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+PathKVTransfer, bytes.NewReader(t.encode()))
	if err != nil {
		return protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "KV transfer to %s: %v", addr, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := client.Do(req)
	if err != nil {
		return protocol.Errorf(http.StatusBadGateway, protocol.ErrTypeServer, "KV transfer to %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	if e := protocol.ParseError(resp.StatusCode, body); e != nil {
		e.Message = "KV transfer to " + addr + ": " + e.Message
		return e
	}
	return protocol.Errorf(http.StatusBadGateway, protocol.ErrTypeServer, "KV transfer to %s: status %d", addr, resp.StatusCode)
}

// checkTransfer verifies that a transfer fits this engine's model.
func (e *Engine) checkTransfer(t *transfer) *protocol.Error {
	fp, layers, dim := e.kvShape()
	if t.fingerprint != fp || t.layers != layers || t.dim != dim {
		return protocol.InvalidRequest("", "KV transfer is for another model (fingerprint %x, %d layers of %d), this engine runs %x (%d of %d)",
			t.fingerprint, t.layers, t.dim, fp, layers, dim)
	}
	return nil
}

// kvShape is what this engine's KV transfers carry: its model's
// fingerprint, layers and width. A timed engine's KV is one word a
// position (see timed), which the wire form carries as one layer of
// width 1: a key and a value of one float32 each, the word's two halves.
func (e *Engine) kvShape() (fingerprint uint64, layers, dim int) {
	if e.timed != nil {
		return e.timed.seed, 1, 1
	}
	c := e.model.Config()
	return e.model.Fingerprint(), c.Layers, c.Dim
}
