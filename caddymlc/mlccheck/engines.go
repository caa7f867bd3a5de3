package mlccheck

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// models checks that engine i answers GET /v1/models with the model.
func (ck *checker) models(ctx context.Context, i int) {
	var list protocol.ModelList
	err := ck.c.getJSON(ctx, ck.r.url(i)+protocol.PathModels, &list)
	if err != nil {
		ck.fail(CheckModels, []int{i}, "%v", err)
		return
	}
	ck.answered[i] = true
	ids := make([]string, len(list.Data))
	for j, m := range list.Data {
		ids[j] = m.ID
		if m.ID == ck.r.cfg.Path {
			ck.pass(CheckModels, []int{i}, "serves %s", m.ID)
			return
		}
	}
	ck.fail(CheckModels, []int{i}, "serves %s, not the configured model %s", quoteList(ids), ck.r.cfg.Path)
}

func quoteList(s []string) string {
	if len(s) == 0 {
		return "no model"
	}
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// completion checks that engine i gives a token-id prompt the same greedy
// text whole and streamed.
func (ck *checker) completion(ctx context.Context, i int) {
	ids := ck.p.ids("completion", 24)
	whole, streamed, err := ck.bothWays(ctx, i, protocol.TokenPrompt(ids))
	switch {
	case err != nil:
		ck.fail(CheckCompletion, []int{i}, "a prompt of %d token ids: %v", len(ids), err)
	case whole.text != streamed.text || whole.finish != streamed.finish:
		ck.fail(CheckCompletion, []int{i}, "a prompt of %d token ids: whole %q (%s), streamed %q (%s)",
			len(ids), whole.text, whole.finish, streamed.text, streamed.finish)
	default:
		ck.pass(CheckCompletion, []int{i}, "a prompt of %d token ids, whole and streamed: %q (%s)", len(ids), whole.text, whole.finish)
	}
}

// bothWays completes prompt on engine i whole and streamed.
func (ck *checker) bothWays(ctx context.Context, i int, prompt protocol.Prompt) (whole, streamed answer, err error) {
	url := ck.r.url(i) + protocol.PathCompletions
	if whole, err = ck.c.complete(ctx, url, greedy(prompt)); err != nil {
		return whole, streamed, fmt.Errorf("whole: %w", err)
	}
	req := greedy(prompt)
	req.Stream, req.StreamOptions = true, &protocol.StreamOptions{IncludeUsage: true}
	if streamed, err = ck.c.stream(ctx, url, req); err != nil {
		return whole, streamed, fmt.Errorf("streamed: %w", err)
	}
	return whole, streamed, nil
}

// completionString checks, where the router has the tokenizer, that
// engine i gives a string prompt the same text whole and streamed, and
// that it tokenizes it as the router does: the router sends engines token
// ids, and a request resumed after a preemption must read the same.
func (ck *checker) completionString(ctx context.Context, i int) {
	if ck.r.tok == nil {
		ck.skip(CheckCompletionString, []int{i}, "the router has no tokenizer for model %s (%v): it serves token-id prompts only", ck.r.cfg.Path, ck.r.tokErr)
		return
	}
	text := ck.p.text("string", 10)
	ids := ck.r.tok.Encode(text)
	whole, streamed, err := ck.bothWays(ctx, i, protocol.Prompt{Text: text, IsText: true})
	if err != nil {
		ck.fail(CheckCompletionString, []int{i}, "the prompt %q: %v", text, err)
		return
	}
	byIDs, err := ck.c.complete(ctx, ck.r.url(i)+protocol.PathCompletions, greedy(protocol.TokenPrompt(ids)))
	switch {
	case err != nil:
		ck.fail(CheckCompletionString, []int{i}, "the prompt %q as the router's %d token ids: %v", text, len(ids), err)
	case whole.text != streamed.text || whole.finish != streamed.finish:
		ck.fail(CheckCompletionString, []int{i}, "the prompt %q: whole %q (%s), streamed %q (%s)", text, whole.text, whole.finish, streamed.text, streamed.finish)
	case whole.usage != nil && whole.usage.PromptTokens != len(ids):
		ck.fail(CheckCompletionString, []int{i}, "the engine makes %d tokens of the prompt %q, the router's tokenizer %d: the router's token ids would not be the engine's",
			whole.usage.PromptTokens, text, len(ids))
	case byIDs.text != whole.text:
		ck.fail(CheckCompletionString, []int{i}, "the prompt %q gives %q as a string, %q as the router's token ids", text, whole.text, byIDs.text)
	default:
		ck.pass(CheckCompletionString, []int{i}, "a string prompt, whole, streamed and as the router's %d token ids: %q", len(ids), whole.text)
	}
}

// inputLimit finds the limit in MLC's answer to a prompt that is too long
// ("... larger than the model input length limit N."), which the built-in
// engine gives in the same words.
var inputLimit = regexp.MustCompile(`input length limit (\d+)`)

// contextLength checks that engine i holds the context the router bounds
// requests by: it refuses a prompt of one token more, saying so.
func (ck *checker) contextLength(ctx context.Context, i int) {
	limit := ck.r.context
	if limit <= 0 {
		ck.skip(CheckContextLength, []int{i}, "the router does not know the context of engine %s with model %s (it leaves the bound to the engine)", ck.r.kind, ck.r.cfg.Path)
		return
	}
	url := ck.r.url(i) + protocol.PathCompletions
	over := greedy(protocol.TokenPrompt(repeatTo(ck.p.ids("context", 64), limit+1)))
	over.MaxTokens = new(1)
	_, err := ck.c.complete(ctx, url, over)
	status := statusOf(err)
	switch {
	case err == nil:
		ck.fail(CheckContextLength, []int{i}, "the engine accepted a prompt of %d tokens: it holds more than the %d the router bounds requests by", limit+1, limit)
		return
	case status < 400 || status >= 500:
		ck.fail(CheckContextLength, []int{i}, "a prompt of %d tokens: %v", limit+1, err)
		return
	}
	msg := ""
	if e := apiErrorOf(err); e != nil {
		msg = e.Message
	}
	if m := inputLimit.FindStringSubmatch(msg); m != nil {
		if n, _ := strconv.Atoi(m[1]); n != limit {
			ck.fail(CheckContextLength, []int{i}, "the engine's input limit is %d tokens, the router bounds requests by %d", n, limit)
		} else {
			ck.pass(CheckContextLength, []int{i}, "%d tokens, as the router bounds requests", limit)
		}
		return
	}
	// Not MLC's words: the engine must then take a prompt of the limit.
	at := greedy(protocol.TokenPrompt(repeatTo(ck.p.ids("context", 64), limit)))
	at.MaxTokens = new(1)
	if _, err := ck.c.complete(ctx, url, at); err != nil {
		ck.fail(CheckContextLength, []int{i}, "the engine refuses a prompt of %d tokens, which the router lets through: %v", limit, err)
		return
	}
	ck.pass(CheckContextLength, []int{i}, "takes %d tokens and refuses %d (%d), as the router bounds requests", limit, limit+1, status)
}

// repeatTo repeats ids to n tokens.
func repeatTo(ids []int, n int) []int {
	out := make([]int, n)
	for j := range out {
		out[j] = ids[j%len(ids)]
	}
	return out
}

// isNotFound reports a call the engine does not serve (an extension of
// caddy-mlc's on an engine without it).
func isNotFound(err error) bool {
	s := statusOf(err)
	return s == http.StatusNotFound || s == http.StatusMethodNotAllowed
}
