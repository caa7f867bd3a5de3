package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"sync/atomic"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin/model"
	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// errStopped is returned to callers once the scheduler has stopped.
var errStopped = errors.New("engine is shutting down")

// Engine is the model, its KV cache and the scheduler goroutine that owns
// them. Handlers talk to the scheduler by running closures on it (do).
type Engine struct {
	opts  *Options
	model *model.Model // nil in a timed engine
	// timed is a timed engine's generator and clock (--timing), nil
	// otherwise.
	timed   *timed
	tok     Tokenizer
	vocab   int
	allowed []bool // ids the model may sample
	eos     map[int]bool
	// grammars are the response formats' grammars over the vocabulary.
	grammars *grammars
	disagg   bool // started in an NVSHMEM world: preempted requests end
	logger   *log.Logger
	maxSeq   int // tokens of one sequence at most (see context.go)

	// replies are the --replies entries (tests only): a context one of
	// them matches is answered with its text (see replies.go).
	replies []reply

	// The model's chat template (nil, with chatErr, when it has none)
	// and the stop strings it adds to every request, as MLC adds its
	// conversation template's stop_str to completions and chats alike.
	chat      chat.Template
	chatErr   error
	tmplStops []string

	// emb is the embedding model (--embedding-model), nil without one.
	// It runs on the handlers' goroutines: it shares nothing with the
	// scheduler.
	emb *embedder

	cmds chan func()
	done chan struct{}

	// slowness is the compute time the engine adds (Options.Slowness);
	// nil for none. The HTTP handlers replace it at run time.
	slowness atomic.Pointer[protocol.Slowness]

	// Owned by the scheduler goroutine.
	sched    scheduler
	prepared map[string]*sequence // by user
	// released holds the users whose reservations were released, until
	// their reservation would have expired: a prep_recv that reaches the
	// scheduler after its own release (the router gave up on it while it
	// was still on its way) is refused rather than left to expire.
	released    map[string]time.Time
	pendingPrep []*prepWait // prep_recvs waiting for pages
	blocked     int         // queued work the last step could not start (Metrics.Blocked)
	active      map[*request]bool
	scratch     *model.Scratch
	logits      []float32
	stats       counters
}

// counters are the tokens the engine computed, and those of its answered
// requests' prompts it took from its prefix cache instead.
type counters struct {
	prefillTokens int64
	decodeTokens  int64
	reusedTokens  int64
	prefillTime   time.Duration // in prefill steps
}

// NewEngine loads the model of opts and sizes the KV cache. disagg says
// whether the engine is part of an NVSHMEM world.
func NewEngine(opts *Options, disagg bool, logOut io.Writer) (*Engine, error) {
	m, tok, err := loadModel(opts.Model, opts.Timing == nil)
	if err != nil {
		return nil, err
	}
	window, err := contextWindow(opts)
	if err != nil {
		return nil, err
	}
	var replies []reply
	if opts.Replies != "" {
		if replies, err = loadReplies(opts.Replies); err != nil {
			return nil, err
		}
	}
	var emb *embedder
	if opts.EmbeddingModel != "" {
		if emb, err = loadEmbedder(opts.EmbeddingModel); err != nil {
			return nil, err
		}
	}
	pages := pagesFor(opts.Overrides.MaxTotalSeqLength)
	e := &Engine{
		opts: opts, model: m, tok: tok, vocab: tok.VocabSize(), disagg: disagg, emb: emb, replies: replies,
		maxSeq:   sequenceLimit(opts, window),
		logger:   log.New(logOut, "mlc-engine: ", log.LstdFlags|log.LUTC),
		cmds:     make(chan func()),
		done:     make(chan struct{}),
		prepared: map[string]*sequence{},
		released: map[string]time.Time{},
		active:   map[*request]bool{},
		eos:      map[int]bool{},
	}
	prefixCache := opts.PrefixCacheMode == protocol.PrefixCacheRadix
	pool := kvcache.NewChainPool(pages, prefixCache)
	if m != nil {
		c := m.Config()
		pool = kvcache.NewPool(pages, c.Layers, c.Dim, prefixCache)
		e.scratch, e.logits = m.NewScratch(), make([]float32, c.Vocab)
	}
	e.sched = scheduler{pool: pool, maxRunning: opts.Overrides.MaxNumSequence, chunk: opts.Overrides.PrefillChunkSize, logf: e.logf}
	if disagg {
		e.sched.endPreempted = func(s *sequence) { e.finish(s, finishPreempt) }
	}
	for _, id := range tok.EOSTokenIDs() {
		e.eos[id] = true
	}
	e.SetSlowness(opts.Slowness)
	e.loadChat()
	e.allowed = allowedIDs(tok, e.vocab, e.eos)
	e.grammars = newGrammars(tok, e.vocab, e.allowed, e.eos)
	if opts.Timing != nil {
		e.timed = newTimed(opts, e.allowed, e.eos)
	}
	for i, r := range replies {
		if got := tok.Decode(tok.Encode(r.Reply)); got != r.Reply {
			e.logf("--replies %s: entry %d: the tokenizer does not spell the reply back exactly (%q), so neither will the answer", opts.Replies, i, got)
		}
	}
	if len(replies) > 0 {
		e.logf("--replies %s: %d scripted replies (for tests only)", opts.Replies, len(replies))
	}
	return e, nil
}

// loadChat loads the model's chat template. Its stop strings end every
// generation, and its stop token ids end one as EOS does, as in MLC. A
// model without a template serves completions only.
func (e *Engine) loadChat() {
	e.chat, e.chatErr = chat.ForModel(e.opts.Model)
	if e.chatErr != nil {
		e.chat = nil
		e.logf("no chat template: %s is off: %v", protocol.PathChatCompletions, e.chatErr)
		return
	}
	e.tmplStops = e.chat.StopStrings()
	if t, ok := e.chat.(chat.TokenIDTemplate); ok {
		for _, id := range t.StopTokenIDs() {
			if id >= 0 && id < e.vocab {
				e.eos[id] = true
			}
		}
	}
}

// loadModel loads the tokenizer of model and, with weights, builds the
// model for its vocabulary, seeded by the model's name (a timed engine
// has none).
func loadModel(name string, weights bool) (*model.Model, Tokenizer, error) {
	tok, err := tokenizer.ForModel(name)
	if err != nil || !weights {
		return nil, tok, err
	}
	cfg := model.DefaultConfig(tok.VocabSize(), 0)
	cfg.EOSBias = 0
	for _, id := range tok.EOSTokenIDs() {
		if id >= 0 && id < cfg.Vocab {
			cfg.EOS, cfg.EOSBias = id, model.DefaultConfig(0, 0).EOSBias
			break
		}
	}
	m, err := model.New(modelName(name), cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("load model: %w", err)
	}
	return m, tok, nil
}

// specialTokens is implemented by tokenizers that know their special
// tokens (the tokenizer.json ones).
type specialTokens interface {
	IsSpecial(id int) bool
}

// allowedIDs marks the ids the model may sample: what the tokenizer allows,
// and never a special token other than EOS.
func allowedIDs(tok Tokenizer, vocab int, eos map[int]bool) []bool {
	allowed := make([]bool, vocab)
	g, restricted := tok.(generatable)
	sp, hasSpecial := tok.(specialTokens)
	for id := range allowed {
		allowed[id] = (!restricted || g.Generatable(id)) && (eos[id] || !hasSpecial || !sp.IsSpecial(id))
	}
	return allowed
}

// Run is the scheduler loop. It returns when ctx is done, after aborting
// every request.
//
// The loop sleeps only after a step that made no progress. A step is a
// function of the scheduler's state alone, so a step that changed nothing
// would change nothing again until a command, a reservation's deadline or
// the end arrives. A step that did work may have freed pages (a sequence
// finished, was preempted or handed over its KV), so another step follows
// at once and offers them to the queued sequences and prep_recvs. Deciding
// on what the step did, rather than on a separate guess of whether queued
// work could run, is what keeps queued work from waiting for an outside
// event.
func (e *Engine) Run(ctx context.Context) {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for idle := true; ; {
		if idle {
			timer.Reset(e.nextDeadline())
			select {
			case f := <-e.cmds:
				f()
			case <-timer.C:
			case <-ctx.Done():
			}
			e.timed.waited()
		}
		e.drain()
		if ctx.Err() != nil {
			e.abortAll()
			return
		}
		e.expire(time.Now())
		idle = !e.step(ctx)
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

// SetSlowness replaces the compute time the engine adds (see
// protocol.Slowness); it holds from the next scheduler step.
func (e *Engine) SetSlowness(s protocol.Slowness) {
	if s == (protocol.Slowness{}) {
		e.slowness.Store(nil)
		return
	}
	e.slowness.Store(&s)
}

// Slowness is the compute time the engine adds.
func (e *Engine) Slowness() protocol.Slowness {
	if s := e.slowness.Load(); s != nil {
		return *s
	}
	return protocol.Slowness{}
}
