package builtin

import (
	"strings"
	"unicode/utf8"
)

// tokenStringer is implemented by tokenizers whose decoding is the
// concatenation of token strings (the tiny one), so text grows per token.
type tokenStringer interface {
	Token(id int) string
}

// output turns a sequence's generated tokens into text, cut at the first
// stop string; it holds back text that may still become a stop string or
// an incomplete character.
type output struct {
	tok  Tokenizer
	stop []string
	ids  []int
	text string
	sent int // bytes of text already handed out
}

// push adds a token and returns the text that may be handed out now, and
// whether a stop string ended the output.
func (o *output) push(id int) (string, bool) {
	o.ids = append(o.ids, id)
	if ts, ok := o.tok.(tokenStringer); ok {
		o.text += ts.Token(id)
	} else {
		o.text = o.tok.Decode(o.ids)
	}
	if cut, ok := o.stopAt(); ok {
		o.text = o.text[:max(cut, o.sent)]
		return o.flush(), true
	}
	end := len(o.text) - o.holdBack()
	if end <= o.sent {
		return "", false
	}
	delta := o.text[o.sent:end]
	o.sent = end
	return delta, false
}

// flush hands out all the remaining text.
func (o *output) flush() string {
	if o.sent >= len(o.text) {
		return ""
	}
	delta := o.text[o.sent:]
	o.sent = len(o.text)
	return delta
}

// stopAt returns where the earliest stop string starts.
func (o *output) stopAt() (int, bool) {
	cut := -1
	for _, s := range o.stop {
		if s == "" {
			continue
		}
		if i := strings.Index(o.text, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	return cut, cut >= 0
}

// holdBack is how many trailing bytes must wait: a prefix of a stop string
// or an incomplete (replacement) character.
func (o *output) holdBack() int {
	hold := 0
	for _, s := range o.stop {
		for k := min(len(s)-1, len(o.text)); k > hold; k-- {
			if strings.HasSuffix(o.text, s[:k]) {
				hold = k
				break
			}
		}
	}
	t := o.text[:len(o.text)-hold]
	for {
		r, size := utf8.DecodeLastRuneInString(t)
		if r != utf8.RuneError || size == 0 {
			break
		}
		t = t[:len(t)-size]
	}
	return len(o.text) - len(t)
}
