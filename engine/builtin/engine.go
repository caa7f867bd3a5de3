package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin/model"
)

// errStopped is returned to callers once the scheduler has stopped.
var errStopped = errors.New("engine is shutting down")

// Engine is the model, its KV cache and the scheduler goroutine that owns
// them. Handlers talk to the scheduler by running closures on it (do).
type Engine struct {
	opts    *Options
	model   *model.Model
	tok     Tokenizer
	allowed []bool // ids the model may sample
	eos     map[int]bool
	disagg  bool // started in an NVSHMEM world: preempted requests end
	logger  *log.Logger

	cmds chan func()
	done chan struct{}

	// Owned by the scheduler goroutine.
	pool        *kvcache.Pool
	waiting     []*sequence
	running     []*sequence
	prepared    map[string]*sequence // by user
	pendingPrep []*prepWait          // prep_recvs waiting for pages
	active      map[*request]bool
	admitSeq    uint64
	scratch     *model.Scratch
	logits      []float32
	stats       counters
}

// counters are the scheduler's running totals.
type counters struct {
	preemptions   int64
	prefillTokens int64
	decodeTokens  int64
}

// NewEngine loads the model of opts and sizes the KV cache. disagg says
// whether the engine is part of an NVSHMEM world.
func NewEngine(opts *Options, disagg bool, logOut io.Writer) (*Engine, error) {
	tok, err := LoadTokenizer(opts.Model)
	if err != nil {
		return nil, err
	}
	eosIDs := tok.EOSTokenIDs()
	eos := 0
	if len(eosIDs) > 0 {
		eos = eosIDs[0]
	}
	m, err := model.New(modelName(opts.Model), model.DefaultConfig(tok.VocabSize(), eos))
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	c := m.Config()
	pages := pagesFor(opts.Overrides.MaxTotalSeqLength)
	e := &Engine{
		opts: opts, model: m, tok: tok, disagg: disagg,
		logger:   log.New(logOut, "mlc-engine: ", log.LstdFlags|log.LUTC),
		cmds:     make(chan func()),
		done:     make(chan struct{}),
		pool:     kvcache.NewPool(pages, c.Layers, c.Dim, opts.PrefixCacheMode == "radix"),
		prepared: map[string]*sequence{},
		active:   map[*request]bool{},
		scratch:  m.NewScratch(),
		logits:   make([]float32, c.Vocab),
		eos:      map[int]bool{},
	}
	for _, id := range eosIDs {
		e.eos[id] = true
	}
	e.allowed = allowedIDs(tok, c.Vocab)
	return e, nil
}

// allowedIDs marks the ids the model may sample.
func allowedIDs(tok Tokenizer, vocab int) []bool {
	allowed := make([]bool, vocab)
	g, restricted := tok.(generatable)
	for id := range allowed {
		allowed[id] = !restricted || g.Generatable(id)
	}
	return allowed
}

// Run is the scheduler loop. It returns when ctx is done, after aborting
// every request.
func (e *Engine) Run(ctx context.Context) {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if !e.busy() {
			timer.Reset(e.nextDeadline())
			select {
			case f := <-e.cmds:
				f()
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		e.drain()
		if ctx.Err() != nil {
			e.abortAll()
			return
		}
		e.expire(time.Now())
		e.step()
	}
}

// drain runs the commands already waiting.
func (e *Engine) drain() {
	for {
		select {
		case f := <-e.cmds:
			f()
		default:
			return
		}
	}
}

// busy reports whether a step would do work.
func (e *Engine) busy() bool {
	return len(e.running) > 0 || e.admissible() != nil
}

// nextDeadline is how long until the first prep_recv reservation expires.
func (e *Engine) nextDeadline() time.Duration {
	d := time.Hour
	now := time.Now()
	for _, s := range e.prepared {
		d = min(d, max(s.deadline.Sub(now), time.Millisecond))
	}
	return d
}

// do runs f on the scheduler goroutine and waits for it.
func (e *Engine) do(f func()) error {
	ran := make(chan struct{})
	select {
	case e.cmds <- func() { f(); close(ran) }:
	case <-e.done:
		return errStopped
	}
	select {
	case <-ran:
		return nil
	case <-e.done:
		return errStopped
	}
}

// Done is closed when the scheduler has stopped.
func (e *Engine) Done() <-chan struct{} { return e.done }

// logf writes one log line.
func (e *Engine) logf(format string, args ...any) { e.logger.Printf(format, args...) }
