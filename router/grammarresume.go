package router

import (
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/toolcall"
)

// A structured answer (a response_format, a required tool call: both a
// grammar) resumes exactly only on engines that read resumed_tokens,
// caddy-mlc's extension, and start the grammar after the text already
// given. MLC's engines restart the grammar at the resumed point, which
// would splice two answers into one that does not parse. Against them a
// structured choice that an engine drops after some text starts over
// when nothing reached the client (a whole answer, and a required call,
// which the client sees only once it is whole: their attempts' text is
// staged, and sent only once an attempt finishes), and otherwise ends
// with a clear error (a streamed response format: its start is the
// client's already).

// grammarResumes reports whether the choice's text resumes exactly on
// its engines: no grammar, or engines that read resumed_tokens.
func (j *choiceJob) grammarResumes() bool {
	return j.c.req.ResponseFormat == nil || j.c.r.EngineKind.Driver().Traits().Extensions == engine.ExtensionsAll
}

// stagesAttempts reports whether the choice's attempts are staged: a
// grammar its engines cannot resume, in an answer whose client sees
// nothing before it is whole (not streamed, or a required call).
func (j *choiceJob) stagesAttempts() bool {
	if j.grammarResumes() {
		return false
	}
	tc := j.c.req.ToolCalling
	return !j.c.req.Stream || tc != nil && tc.Format == toolcall.JSON
}

// cannotResumeGrammar ends a streamed structured choice an engine that
// cannot resume its grammar dropped after text was sent.
func cannotResumeGrammar() *protocol.Error {
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
		"the engine stopped this structured answer after part of it was sent, and its engines cannot resume a grammar from the text (the router would splice two answers): retry the request").WithCode(codeCannotResume)
}

// codeCannotResume is the code of an answer an engine stopped that the
// router cannot resume exactly.
const codeCannotResume = "cannot_resume"

// restart drops the text an attempt staged: the next attempt starts the
// choice over.
func (j *choiceJob) restart() { j.delivered.Reset() }

// stagedSink holds an attempt's text until the attempt finishes the
// choice: finish (or the response's end) sends what it holds; a choice
// the attempt did not finish drops it (restart), so the client gets one
// attempt's answer whole.
type stagedSink struct {
	sink
	held []stagedDelta
}

type stagedDelta struct {
	index    int
	text     string
	logprobs *protocol.CompletionLogprobs
}

func (s *stagedSink) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	s.held = append(s.held, stagedDelta{index, text, logprobs})
	return nil
}

func (s *stagedSink) flush() {}

// commit sends what the attempt staged.
func (s *stagedSink) commit() error {
	held := s.held
	s.held = nil
	for _, d := range held {
		if err := s.sink.delta(d.index, d.text, d.logprobs); err != nil {
			return err
		}
	}
	return nil
}

func (s *stagedSink) finish(index int, reason string) {
	_ = s.commit() // a client gone shows at the response's end
	s.sink.finish(index, reason)
}

func (s *stagedSink) done(usage protocol.Usage) {
	_ = s.commit()
	s.sink.done(usage)
}

func (s *stagedSink) fail(err *protocol.Error) {
	s.held = nil
	s.sink.fail(err)
}
