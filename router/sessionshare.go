package router

import "time"

// Several Caddy replicas in front of the same engines each see some of a
// session's turns. Each tells the others where it sent a session's turn
// (a SessionEvent, through package cluster's SessionSink), and takes
// theirs into its own table, so that the next turn goes to the engine of
// the last wherever it arrives.

// SessionEvent is a session's turn routed to an engine.
type SessionEvent struct {
	// Session is the hash of its key (never the key), Role the role the
	// engine was chosen for, Engine its address.
	Session uint64
	Role    string
	Engine  string
	// Marks are pages of the turn's prefix chain (see sessionMarks).
	Marks []PrefixMark
}

// SessionSink receives the sessions a replica routes, on the request's
// path: it must not block (it queues them).
type SessionSink interface {
	SessionRouted(model string, ev SessionEvent)
}

// SetSessionSink makes s the process's SessionSink (nil: none). It
// returns a function that removes s, unless another sink replaced it
// since.
func (lv *Live) SetSessionSink(s SessionSink) (remove func()) {
	return lv.sessionSink.set(s, s == nil)
}

// shareSession hands a session's new engine to the sink, if any.
func shareSession(lv *Live, e sessionEntry) {
	s, ok := lv.sessionSink.get()
	if !ok {
		return
	}
	s.SessionRouted(e.key.model, SessionEvent{Session: e.key.session, Role: e.key.role, Engine: e.engine, Marks: e.marks})
}

// ApplySessionEvent takes another replica's routing of a session of
// model into the process's table, as heard of now.
func (lv *Live) ApplySessionEvent(model string, ev SessionEvent) {
	if ev.Session == 0 {
		return
	}
	lv.sessions.set(sessionEntry{key: sessionKey{model: model, session: ev.Session, role: ev.Role}, engine: ev.Engine, marks: ev.Marks, seen: time.Now()})
}
