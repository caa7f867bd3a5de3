// Package testnet has the network helpers the tests of several packages
// share.
package testnet

import (
	"io"
	"net"
	"syscall"
	"testing"
)

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. All n are held open together while they are chosen, so they
// differ from each other.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// FreePort returns one such port.
func FreePort(tb testing.TB) int {
	tb.Helper()
	return FreePorts(tb, 1)[0]
}

// StalledClient opens a connection to addr with a small receive buffer
// and sends it raw, an HTTP request it then never reads the answer of: a
// client that stopped reading, whose window closes after a few kilobytes.
// The connection is closed when the test ends.
func StalledClient(tb testing.TB, addr, request string) net.Conn {
	tb.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, request); err != nil {
		tb.Fatal(err)
	}
	return conn
}
