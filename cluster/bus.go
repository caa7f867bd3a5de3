package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// The bus carries small messages between the replicas over Redis
// publish/subscribe. A message is queued without waiting (Publish); a
// background publisher sends a channel's queued messages together, in one
// PUBLISH, once busBatch of them wait or busFlush after the first: the
// request that queues one never waits on Redis. A full queue, or a Redis
// out of reach, drops messages: what the bus carries is advice, which a
// replica can do without.
const (
	busQueue   = 4096
	busBatch   = 64
	busFlush   = 10 * time.Millisecond
	busTimeout = time.Second // of a PUBLISH or SUBSCRIBE, off any request's path
	// frameVersion begins every frame: a replica running an older or
	// newer format ignores it.
	frameVersion = 1
	maxFrame     = 1 << 20
)

type bus struct {
	out chan busMsg

	mu       sync.Mutex
	handlers map[string]*handler // by channel
	wake     chan struct{}       // the handlers changed
}

type busMsg struct {
	channel string
	data    []byte
}

// handler receives the other replicas' messages of a channel.
type handler struct{ fn func([][]byte) }

func (b *bus) init() {
	b.out = make(chan busMsg, busQueue)
	b.handlers = map[string]*handler{}
	b.wake = make(chan struct{}, 1)
}

// Publish queues msg for the other replicas' subscribers of channel (a
// name from Key), without waiting; false when it is dropped (the queue is
// full, or Redis out of reach). msg must not change afterwards.
func (c *Conn) Publish(channel string, msg []byte) bool {
	if !c.Up() {
		dropped.Inc()
		return false
	}
	select {
	case c.bus.out <- busMsg{channel, msg}:
		return true
	default:
		dropped.Inc()
		return false
	}
}

// Subscribe calls fn with the messages other replicas publish on channel,
// a batch at a time, on the subscriber's goroutine (fn must be quick and
// must not keep the slices); the latest fn of a channel replaces the one
// before. The returned function ends the subscription, unless a later fn
// replaced it.
func (c *Conn) Subscribe(channel string, fn func(msgs [][]byte)) (cancel func()) {
	h := &handler{fn: fn}
	c.bus.mu.Lock()
	c.bus.handlers[channel] = h
	c.bus.mu.Unlock()
	c.bus.poke()
	return func() {
		c.bus.mu.Lock()
		if c.bus.handlers[channel] == h {
			delete(c.bus.handlers, channel)
		}
		c.bus.mu.Unlock()
		c.bus.poke()
	}
}

func (b *bus) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// publish sends the queued messages, in batches, until Close.
func (c *Conn) publish() {
	batches := map[string]*frame{}
	var order []string
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed := false
	flush := func(channel string) {
		f := batches[channel]
		if f == nil || f.n == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, busTimeout)
		err := c.client.Publish(ctx, channel, f.buf).Err()
		cancel()
		if err != nil {
			dropped.Add(float64(f.n))
			if c.ctx.Err() == nil {
				c.Failed(err)
			}
		}
		f.reset(c.id)
	}
	for {
		select {
		case <-c.ctx.Done():
			return
		case m := <-c.bus.out:
			f := batches[m.channel]
			if f == nil {
				f = &frame{}
				f.reset(c.id)
				batches[m.channel] = f
				order = append(order, m.channel)
			}
			f.add(m.data)
			if f.n >= busBatch || len(f.buf) >= maxFrame/2 {
				flush(m.channel)
			} else if !armed {
				timer.Reset(busFlush)
				armed = true
			}
		case <-timer.C:
			armed = false
			for _, ch := range order {
				flush(ch)
			}
		}
	}
}

// subscribe receives the other replicas' messages, until Close. go-redis
// reconnects the subscription (and subscribes its channels again) when
// Redis comes back. It connects once there is a channel to listen to.
func (c *Conn) subscribe() {
	for {
		c.bus.mu.Lock()
		n := len(c.bus.handlers)
		c.bus.mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case <-c.ctx.Done():
			return
		case <-c.bus.wake:
		}
	}
	ps := c.client.Subscribe(c.ctx)
	defer ps.Close()
	msgs := ps.Channel(redis.WithChannelSize(1024))
	subscribed := map[string]bool{}
	c.syncChannels(ps, subscribed)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.bus.wake:
			c.syncChannels(ps, subscribed)
		case m, ok := <-msgs:
			if !ok {
				return
			}
			c.bus.mu.Lock()
			h := c.bus.handlers[m.Channel]
			c.bus.mu.Unlock()
			if h != nil {
				c.deliver(m.Payload, h.fn)
			}
		}
	}
}

// syncChannels subscribes the channels that have a handler and not yet a
// subscription, and unsubscribes those that have no handler any more.
func (c *Conn) syncChannels(ps *redis.PubSub, subscribed map[string]bool) {
	c.bus.mu.Lock()
	var add, drop []string
	for ch := range c.bus.handlers {
		if !subscribed[ch] {
			add = append(add, ch)
		}
	}
	for ch := range subscribed {
		if c.bus.handlers[ch] == nil {
			drop = append(drop, ch)
		}
	}
	c.bus.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, busTimeout)
	defer cancel()
	// go-redis keeps the channels even when the command fails, and
	// subscribes them when it reconnects.
	if len(add) > 0 {
		if err := ps.Subscribe(ctx, add...); err != nil {
			c.log.Debug("cluster: subscribing", zap.Strings("channels", add), zap.Error(err))
		}
		for _, ch := range add {
			subscribed[ch] = true
		}
	}
	if len(drop) > 0 {
		if err := ps.Unsubscribe(ctx, drop...); err != nil {
			c.log.Debug("cluster: unsubscribing", zap.Strings("channels", drop), zap.Error(err))
		}
		for _, ch := range drop {
			delete(subscribed, ch)
		}
	}
}

// deliver splits a frame and hands its messages to fn, unless the frame
// is this replica's own or not one it reads.
func (c *Conn) deliver(payload string, fn func([][]byte)) {
	msgs, id, err := splitFrame([]byte(payload))
	if err != nil {
		c.log.Debug("cluster: a message from another replica could not be read", zap.Error(err))
		return
	}
	if id != c.id {
		fn(msgs)
	}
}

// frame is a batch of messages: the version, the sending replica's id,
// then each message's length (uvarint) and bytes.
type frame struct {
	buf []byte
	n   int
}

func (f *frame) reset(id uint64) {
	f.buf = binary.LittleEndian.AppendUint64(append(f.buf[:0:0], frameVersion), id)
	f.n = 0
}

func (f *frame) add(msg []byte) {
	f.buf = binary.AppendUvarint(f.buf, uint64(len(msg)))
	f.buf = append(f.buf, msg...)
	f.n++
}

var errFrame = errors.New("malformed frame")

// splitFrame returns a frame's messages and its replica's id.
func splitFrame(b []byte) ([][]byte, uint64, error) {
	if len(b) < 9 || b[0] != frameVersion || len(b) > maxFrame {
		return nil, 0, errFrame
	}
	id := binary.LittleEndian.Uint64(b[1:9])
	b = b[9:]
	var out [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, 0, errFrame
		}
		out = append(out, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return out, id, nil
}
