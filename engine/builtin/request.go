package builtin

import (
	"context"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// request is one completion (n sequences) or one remote_send computation,
// owned by the scheduler goroutine once submitted.
type request struct {
	id     string
	prompt []int
	params genParams
	seqs   []*sequence
	events *eventQueue
	// arrival ranks the request's sequences for admission and preemption
	// (unix microseconds): the router's first arrival of it
	// (protocol.CompletionRequest.Arrival), else when the engine got it.
	arrival int64

	live             int  // sequences not finished
	noRoom           bool // the prompt left no room for a token: ended at once
	completionTokens int
	prefixMatched    int
	// announced says its first event went out, with prefixMatched
	// (protocol.MatchedChunk).
	announced bool

	// reply is the --replies choice for the prompt (nil: none matched),
	// made once (replyChosen) for all its sequences: every sequence
	// samples first from the prompt alone.
	replyChosen bool
	reply       *script

	// computeOnly requests (remote_send) compute the keys and values of
	// prompt[:len(prompt)] without sampling, then hand back those of
	// [sendBegin, len(prompt)) as payload.
	computeOnly bool
	sendBegin   int
}

// arrivalOf is the rank of a request that says it arrived at arrival
// (0: it does not say, it arrives now).
func arrivalOf(arrival int64) int64 {
	if arrival > 0 {
		return arrival
	}
	return time.Now().UnixMicro()
}

// seqState is where a sequence is in the scheduler.
type seqState int

const (
	seqWaiting seqState = iota
	seqRunning
	seqPrepared // holds prep_recv pages, waiting for start_generate
	seqDone
)

// event is what the scheduler tells a request's handler.
type event struct {
	choice   int
	text     string
	logprobs []tokenLogprob  // of the tokens text completes, when asked for
	finish   string          // "" while the choice goes on
	done     bool            // last event of the request
	usage    *protocol.Usage // with done
	payload  []byte          // with done, for computeOnly requests
	aborted  bool            // with done: the engine is shutting down
	// first marks the request's first event, which carries matched, its
	// prefix cache's match (protocol.MatchedChunk).
	first   bool
	matched int
}

// eventQueue is an unbounded queue from the scheduler (which never blocks
// on it) to one handler.
type eventQueue struct {
	mu     sync.Mutex
	events []event
	notify chan struct{}
}

func newEventQueue() *eventQueue { return &eventQueue{notify: make(chan struct{}, 1)} }

// push appends an event and wakes the reader.
func (q *eventQueue) push(e event) {
	q.mu.Lock()
	q.events = append(q.events, e)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// wait returns the queued events, waiting for at least one, or ctx's
// error.
func (q *eventQueue) wait(ctx context.Context) ([]event, error) {
	for {
		q.mu.Lock()
		evs := q.events
		q.events = nil
		q.mu.Unlock()
		if len(evs) > 0 {
			return evs, nil
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
