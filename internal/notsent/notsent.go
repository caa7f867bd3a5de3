// Package notsent bounds what the kernel buffers unsent for a
// connection, so that a write to a client that stopped reading waits
// (and a write deadline can catch it) instead of filling megabytes of
// socket buffer.
package notsent

import "net"

// Limit bounds to n the bytes the kernel holds unsent for c
// (TCP_NOTSENT_LOWAT, on Linux), when it is a TCP connection
// (through TLS and other wrappers that expose the connection under them).
func Limit(c net.Conn, n int) {
	for c != nil {
		if tc, ok := c.(*net.TCPConn); ok {
			setNotSentLowat(tc, n)
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = u.NetConn()
	}
}
