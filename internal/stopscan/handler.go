package stopscan

// Handler applies stop strings to generated text token by token, exactly
// as MLC-LLM's engine does (StopStrHandlerObj in cpp/tokenizers/
// streamer.cc): whole tokens are released or dropped, never split.
//
// Each Put takes one piece of text: a token's text (MLC's post-processed
// token table entry: the bytes the token stands for) or, for a caller that
// only sees text in chunks, the text of several tokens taken as one. The
// Handler runs one step of KMP matching per byte against every stop
// string, and releases, oldest first, the held pieces that no partial
// match overlaps. When a stop string completes, the pieces before the one
// in which it begins are released and that piece and every later one are
// dropped: MLC answers " finger clothe send" for stop "ar" where a
// byte-granular scan answers " finger clothe send c" (the piece " car"
// held the stop's start). Of several stop strings, the first to complete
// wins; of those completing at the same byte, the one that begins
// earliest. Text after the completing byte is not looked at.
//
// A Handler holds the pieces that a stop string may still start in, and
// the last released bytes (fewer than the longest stop string) for Drop;
// its cost per byte is the number of stop strings, amortised.
//
// It is not safe for concurrent use.
type Handler struct {
	stops  []string
	tables [][]int // KMP partial match table of each stop string
	match  []int   // bytes of each stop string matched so far
	maxLen int

	held       []string // pieces put and not released, oldest first
	pendingLen int      // bytes of the held pieces looked at
	triggered  bool
	start      int // where the stop string begins, in bytes from the first held piece

	recent    []string // the last released pieces, covering maxLen-1 bytes if there are as many
	recentLen int
	one       []string // Put's answer without stop strings
}

// NewHandler returns a Handler for stops; empty strings are ignored (MLC
// refuses them). With no stop strings every piece is released at once.
func NewHandler(stops []string) *Handler {
	h := &Handler{}
	h.stops, h.maxLen = nonEmpty(stops)
	for _, st := range h.stops {
		h.tables = append(h.tables, partialMatchTable(st))
	}
	h.match = make([]int, len(h.stops))
	return h
}

// partialMatchTable is KMP's failure function as MLC's
// CreatePartialMatchTable builds it: t[0] = -1, and t[i] is the length of
// the longest proper prefix of s[:i] that is also its suffix.
func partialMatchTable(s string) []int {
	t := make([]int, len(s))
	t[0] = -1
	for i := 1; i < len(s); i++ {
		p := t[i-1]
		for p != -1 && s[p] != s[i-1] {
			p = t[p]
		}
		t[i] = p + 1
	}
	return t
}

// Put takes the next piece and returns the held pieces it releases,
// oldest first (possibly none, possibly pieces put earlier). The slice is
// the Handler's and valid until the next call. After a stop string has
// completed (Triggered), the pieces not released are dropped: Held tells
// how many bytes they hold, and Put takes nothing more (it returns nil).
func (h *Handler) Put(piece string) []string {
	if len(h.stops) == 0 {
		h.one = append(h.one[:0], piece)
		return h.one
	}
	if h.triggered {
		return nil
	}
	h.held = append(h.held, piece)
	released := 0
	for i := 0; i < len(piece); i++ {
		cutoff := h.step(piece[i])
		n, cum := h.releasable(released, cutoff)
		released += n
		if h.triggered {
			h.start = cutoff - cum
			break
		}
		// The held text shrinks by what was released; what is left is
		// what partial matches still need, and the bytes before them
		// within a held piece.
		h.pendingLen += 1 - cum
	}
	out := h.held[:released:released]
	h.held = h.held[released:]
	h.remember(out)
	return out
}

// step runs one KMP step of every stop string on byte c, the next of the
// held text, and returns how many bytes of the held text (c included) may
// be released: up to the earliest start of a partial match, or, when a
// stop string completes, up to where it begins.
func (h *Handler) step(c byte) int {
	cutoff, stopStart := int(^uint(0)>>1), int(^uint(0)>>1)
	for i, st := range h.stops {
		m := h.match[i]
		for m != -1 && c != st[m] {
			m = h.tables[i][m]
		}
		m++
		h.match[i] = m
		if m == len(st) {
			h.triggered = true
			stopStart = min(stopStart, h.pendingLen+1-len(st))
			continue
		}
		cutoff = min(cutoff, h.pendingLen+1-m)
	}
	if h.triggered {
		return stopStart
	}
	return cutoff
}

// releasable counts the held pieces after the first skip whose bytes all
// lie within the first cutoff bytes of the held text that follows skip,
// and their length. cutoff may be negative after Drop (a partial match
// that began in released text): nothing is releasable then.
func (h *Handler) releasable(skip, cutoff int) (n, cum int) {
	for _, p := range h.held[skip:] {
		if cum+len(p) > cutoff {
			break
		}
		cum += len(p)
		n++
	}
	return n, cum
}

// Finish releases every held piece: the text ended (the length limit, an
// end-of-sequence token) without a stop string. After a stop string it
// releases nothing.
func (h *Handler) Finish() []string {
	if h.triggered {
		return nil
	}
	out := h.held
	h.held = nil
	h.pendingLen = 0
	h.remember(out)
	return out
}

// Triggered reports that a stop string completed: the text ends with the
// pieces released so far.
func (h *Handler) Triggered() bool { return h.triggered }

// Held returns the bytes of the pieces put and not released. After a stop
// string completed, they are the bytes dropped with it: the piece in
// which the stop string begins and every piece after it (the stop string
// may also begin before them, in released text, after a Drop).
func (h *Handler) Held() int {
	n := 0
	for _, p := range h.held {
		n += len(p)
	}
	return n
}

// StopStart returns, after a stop string completed, the offset at which
// it begins, in bytes from the start of the dropped text (see Held): 0 or
// more when it begins in a dropped piece, negative when it begins that
// many bytes before, in text already released (possible only after a
// Drop).
func (h *Handler) StopStart() int { return h.start }

// Drop forgets the held pieces, as if they had not been put: the attempt
// that generated them failed, and the next one generates their text again
// after the released text. Matching goes on from the end of the released
// text, so a stop string that begins there and ends in a later piece is
// still found (StopStart is then negative). A router that resumes a
// generation calls Drop between attempts; an engine never needs it.
func (h *Handler) Drop() {
	h.held, h.pendingLen = nil, 0
	tail := h.tail()
	for i, st := range h.stops {
		m := 0
		for j := 0; j < len(tail); j++ {
			for m != -1 && tail[j] != st[m] {
				m = h.tables[i][m]
			}
			m++
		}
		h.match[i] = m
	}
}

// tail returns the last maxLen-1 released bytes (all of them if fewer):
// no partial match is longer.
func (h *Handler) tail() string {
	var b []byte
	for _, p := range h.recent {
		b = append(b, p...)
	}
	return string(b[max(0, len(b)-(h.maxLen-1)):])
}

// remember keeps the last released pieces, as many as cover maxLen-1
// bytes, for Drop.
func (h *Handler) remember(pieces []string) {
	if h.maxLen <= 1 {
		return
	}
	for _, p := range pieces {
		h.recent = append(h.recent, p)
		h.recentLen += len(p)
	}
	for len(h.recent) > 1 && h.recentLen-len(h.recent[0]) >= h.maxLen-1 {
		h.recentLen -= len(h.recent[0])
		h.recent = h.recent[1:]
	}
}
