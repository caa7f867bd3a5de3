package cluster

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// sessionPublisher is the process's router.SessionSink while a cluster
// runs.
type sessionPublisher struct {
	conn     *Conn
	channels sync.Map // model → its channel's name
}

// SessionRouted queues ev for the other replicas.
func (p *sessionPublisher) SessionRouted(model string, ev router.SessionEvent) {
	ch, ok := p.channels.Load(model)
	if !ok {
		ch, _ = p.channels.LoadOrStore(model, sessionChannel(p.conn, model))
	}
	p.conn.Publish(ch.(string), appendSessionEvent(nil, ev))
}

func sessionChannel(c *Conn, model string) string { return c.Key(model, "session") }

// ShareSessions publishes where this process routes sessions on the
// cluster, from the first call until Stop.
func (s *Sharing) ShareSessions() {
	s.shareSessions.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stopSessions = s.live.SetSessionSink(&sessionPublisher{conn: s.conn})
	})
}

// ApplySessions takes the other replicas' routing of model's sessions
// into the process's table.
func (s *Sharing) ApplySessions(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[model] {
		return
	}
	s.sessions[model] = true
	s.conn.Subscribe(sessionChannel(s.conn, model), func(msgs [][]byte) {
		sharedMetrics()
		for _, m := range msgs {
			if ev, err := decodeSessionEvent(m); err == nil {
				s.live.ApplySessionEvent(model, ev)
				sessionsApplied.Inc()
			}
		}
	})
}

// The wire form of a session event: the session's hash (8 bytes little
// endian), the role and the engine's address (each its length, a
// uvarint, then its bytes), the marks (their count, then each one's
// pages, a uvarint, and hash, 8 bytes). A session keeps at most some 25
// marks (router's sessionMarks); more is malformed.
const maxSessionMarks = 64

var errSessionEvent = errors.New("malformed session event")

// appendSessionEvent appends ev's wire form to b.
func appendSessionEvent(b []byte, ev router.SessionEvent) []byte {
	b = binary.LittleEndian.AppendUint64(b, ev.Session)
	for _, s := range []string{ev.Role, ev.Engine} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(ev.Marks)))
	for _, m := range ev.Marks {
		b = binary.AppendUvarint(b, uint64(m.Pages))
		b = binary.LittleEndian.AppendUint64(b, m.Hash)
	}
	return b
}

// decodeSessionEvent reads an event's wire form.
func decodeSessionEvent(b []byte) (router.SessionEvent, error) {
	var ev router.SessionEvent
	if len(b) < 8 {
		return ev, errSessionEvent
	}
	ev.Session, b = binary.LittleEndian.Uint64(b), b[8:]
	var strs [2]string
	for i := range strs {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return ev, errSessionEvent
		}
		strs[i], b = string(b[k:k+int(n)]), b[k+int(n):]
	}
	ev.Role, ev.Engine = strs[0], strs[1]
	marks, k := binary.Uvarint(b)
	if k <= 0 || marks > maxSessionMarks {
		return ev, errSessionEvent
	}
	b = b[k:]
	ev.Marks = make([]router.PrefixMark, marks)
	for i := range ev.Marks {
		pages, k := binary.Uvarint(b)
		if k <= 0 || pages == 0 || pages > maxChainPages || len(b)-k < 8 {
			return ev, errSessionEvent
		}
		ev.Marks[i] = router.PrefixMark{Pages: int(pages), Hash: binary.LittleEndian.Uint64(b[k:])}
		b = b[k+8:]
	}
	if len(b) != 0 || ev.Session == 0 {
		return ev, errSessionEvent
	}
	return ev, nil
}
