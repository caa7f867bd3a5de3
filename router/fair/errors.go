package fair

import (
	"errors"
	"fmt"
	"time"
)

// ErrClosed is the error of a request submitted to, or waiting in, a
// closed queue.
var ErrClosed = errors.New("fair: queue closed")

// ErrFull matches (with errors.Is) every *FullError.
var ErrFull = errors.New("fair: queue full")

// FullError is the error of a request that found no room in the queue:
// refused at arrival, or pushed out by an arrival of a higher band or of a
// tenant with fewer requests waiting.
type FullError struct {
	// Size is the queue's bound on waiting requests.
	Size int
	// PushedOut is set when the request had been waiting.
	PushedOut bool
}

func (e *FullError) Error() string {
	if e.PushedOut {
		return fmt.Sprintf("the queue of waiting requests is full (%d) and this request gave its place to a request of a higher priority or of a tenant with fewer waiting", e.Size)
	}
	return fmt.Sprintf("the queue of waiting requests is full (%d)", e.Size)
}

// Is makes errors.Is(err, ErrFull) true.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// TimeoutError is the error of a request that waited the queue's timeout
// without being granted.
type TimeoutError struct {
	Waited time.Duration
	Tenant string
	Band   int
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("no engine capacity in %v (band %d)", e.Waited.Round(time.Millisecond), e.Band)
}

// Timeout marks the error as a timeout, as net.Error does.
func (e *TimeoutError) Timeout() bool { return true }
