package completiontest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// preemptChunk is the event an engine ends a preempted stream with.
const preemptChunk = `{"id":"x","object":"text_completion","created":1,"model":"tiny","choices":[{"index":0,"text":"","finish_reason":"preempt"}]}`

// PreemptStream copies an engine's streamed generation from body to w,
// as a proxy in front of the engine would, and ends it as the engine
// ends a preempted one (finish_reason "preempt", then [DONE]) at the
// first text event past the first texts for which preempt says so. It
// reports whether it preempted.
func PreemptStream(w http.ResponseWriter, body io.Reader, texts int, preempt func() bool) bool {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"text":"`) && !strings.Contains(line, `"text":""`) {
			if n++; n > texts && preempt() {
				fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", preemptChunk)
				return true
			}
		}
		fmt.Fprintf(w, "%s\n", line)
		w.(http.Flusher).Flush()
	}
	return false
}
