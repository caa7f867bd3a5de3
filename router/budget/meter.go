package budget

import "time"

// unitsPerToken is a meter's resolution: the microseconds of a minute, so
// that a budget of L tokens per minute refills exactly L units each
// microsecond.
const unitsPerToken = int64(time.Minute / time.Microsecond)

// MaxLimit bounds a budget, MaxCost a request's tokens: the meters'
// arithmetic stays far from overflow.
const (
	MaxLimit = int64(10_000_000_000)
	MaxCost  = int64(10_000_000_000)
	maxUsed  = int64(1) << 62
)

// Meter is one bucket, told as what was spent: Used units (1/60,000,000
// of a token, or of a request) at At, Unix microseconds. A full bucket is
// Used 0.
type Meter struct {
	Used int64 `json:"used"`
	At   int64 `json:"at"`
}

// advance refills m up to now at limit per minute. A clock behind m's
// refills nothing.
func (m Meter) advance(now, limit int64) Meter {
	if now <= m.At {
		return m
	}
	if m.Used > 0 {
		if elapsed := now - m.At; elapsed >= ceilDiv(m.Used, limit) {
			m.Used = 0
		} else {
			m.Used -= elapsed * limit
		}
	}
	m.At = now
	return m
}

// fits reports whether n more fit a budget of limit.
func (m Meter) fits(n, limit int64) bool {
	return m.Used+n*unitsPerToken <= limit*unitsPerToken
}

// waitFor is how long until n fit, in microseconds.
func (m Meter) waitFor(n, limit int64) int64 {
	return max(0, ceilDiv(m.Used+n*unitsPerToken-limit*unitsPerToken, limit))
}

// add spends n (refunds, when negative: never below a full bucket).
func (m Meter) add(n int64) Meter {
	m.Used = min(max(m.Used+n*unitsPerToken, 0), maxUsed)
	return m
}

// remaining is what is left of a budget of limit, whole.
func (m Meter) remaining(limit int64) int64 {
	return max(0, limit*unitsPerToken-m.Used) / unitsPerToken
}

// used is what is spent, rounded up.
func (m Meter) used() int64 { return ceilDiv(m.Used, unitsPerToken) }

// reset is how long until the bucket is full, in microseconds.
func (m Meter) reset(limit int64) int64 { return ceilDiv(m.Used, limit) }

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
