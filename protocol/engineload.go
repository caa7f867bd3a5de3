package protocol

import (
	"encoding/json"
	"strconv"
)

// EngineLoad is an engine's load as the built-in engine reports it in
// usage.extra (see SpecialQueryEngineMetrics): what a router balances on.
// MLC's engines report none of it.
type EngineLoad struct {
	Running int // sequences being prefilled or decoded
	Waiting int // sequences queued (new or preempted) and prep_recvs waiting for pages
	// Blocked is the part of Waiting that the engine's last step could
	// not start (short of KV pages or of a batch slot): what saturation
	// means. The rest has only arrived and starts at the next step.
	Blocked  int
	Prepared int // prep_recv reservations waiting for start_generate
	// PagesCached are KV pages the prefix cache keeps with no sequence
	// using them: the engine evicts them for new work, so they are room
	// as free pages are.
	PagesCached int
	PagesFree   int
	PagesTotal  int
}

// The usage.extra keys of EngineLoad's fields.
const (
	ExtraRunning     = "running"
	ExtraWaiting     = "waiting"
	ExtraBlocked     = "blocked"
	ExtraPrepared    = "prepared"
	ExtraPagesCached = "kv_pages_cached"
	ExtraPagesFree   = "kv_pages_free"
	ExtraPagesTotal  = "kv_pages_total"
)

// fields pairs each key with its field of l.
func (l *EngineLoad) fields() [7]struct {
	key string
	n   *int
} {
	return [...]struct {
		key string
		n   *int
	}{
		{ExtraRunning, &l.Running}, {ExtraWaiting, &l.Waiting}, {ExtraBlocked, &l.Blocked}, {ExtraPrepared, &l.Prepared},
		{ExtraPagesCached, &l.PagesCached}, {ExtraPagesFree, &l.PagesFree}, {ExtraPagesTotal, &l.PagesTotal},
	}
}

// Extra is l as usage.extra fields.
func (l EngineLoad) Extra() map[string]json.RawMessage {
	x := make(map[string]json.RawMessage, 7)
	for _, f := range l.fields() {
		x[f.key] = json.RawMessage(strconv.Itoa(*f.n))
	}
	return x
}

// ParseEngineLoad reads the load fields of usage.extra; ok is false when
// there are none of them. An engine that reports what waits but not what
// of it is blocked has all of it taken as blocked.
func ParseEngineLoad(extra map[string]json.RawMessage) (l EngineLoad, ok bool) {
	l.Blocked = -1
	// An array, not a map: this runs at every request's end.
	for _, f := range l.fields() {
		if raw, found := extra[f.key]; found {
			if n, err := strconv.Atoi(string(raw)); err == nil {
				*f.n, ok = n, true
			}
		}
	}
	if l.Blocked < 0 {
		l.Blocked = l.Waiting
	}
	return l, ok
}

// ExtraPrefillTime is MLC's engine metric (EngineMetrics, in the
// usage.extra of a query_engine_metrics answer) of the seconds its steps
// spent prefilling, which grows after every prefill step, a chunk of a
// long prompt included; the built-in engine reports it too. An engine
// whose count grew between two queries was prefilling meanwhile.
const ExtraPrefillTime = "engine_prefill_time_sum"

// PrefillTimeOf reads ExtraPrefillTime of a query_engine_metrics answer;
// ok is false when the engine does not report it.
func PrefillTimeOf(extra map[string]json.RawMessage) (seconds float64, ok bool) {
	raw, found := extra[ExtraPrefillTime]
	if !found {
		return 0, false
	}
	if err := json.Unmarshal(raw, &seconds); err != nil {
		return 0, false
	}
	return seconds, true
}
