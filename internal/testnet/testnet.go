// Package testnet has the network helpers the tests of several packages
// share.
package testnet

import (
	"net"
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
