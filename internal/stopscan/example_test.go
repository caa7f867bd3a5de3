package stopscan_test

import (
	"fmt"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/internal/stopscan"
)

// An engine puts each generated token's text and hands out the tokens
// the Handler releases; at a stop string, the token it begins in goes.
func ExampleHandler() {
	h := stopscan.NewHandler([]string{"ar"})
	var out []string
	for _, tok := range []string{" finger", " clothe", " send", " car", "."} {
		out = append(out, h.Put(tok)...)
		if h.Triggered() {
			break
		}
	}
	if !h.Triggered() {
		out = append(out, h.Finish()...)
	}
	fmt.Printf("%q, dropped %d bytes\n", strings.Join(out, ""), h.Held())
	// Output: " finger clothe send", dropped 4 bytes
}

// A router puts each chunk an engine sends (the text of one token or of
// several) and delivers what is released. When an attempt fails, Drop
// forgets what was held (the next attempt, whose prompt ends with the
// delivered text, generates it again); a stop string that began in
// delivered text and ends in the next attempt's ends the text there:
// nothing more is delivered, and StopStart says how far back it began.
func ExampleHandler_Drop() {
	h := stopscan.NewHandler([]string{"the end", "xyz"})
	deliver := func(chunk string) {
		fmt.Printf("put %q: deliver %q\n", chunk, strings.Join(h.Put(chunk), ""))
	}
	deliver(" it was the") // "the" may start "the end": the chunk is held, whole
	deliver(" e")
	deliver("x") // "the e" ends no stop: released; "x" may start "xyz"
	h.Drop()     // the attempt failed: "x" was never delivered
	deliver("nd of it")
	fmt.Println(h.Triggered(), h.StopStart())
	// Output:
	// put " it was the": deliver ""
	// put " e": deliver ""
	// put "x": deliver " it was the e"
	// put "nd of it": deliver ""
	// true -5
}
