// Package testnet has the network helpers the tests of several packages
// share.
package testnet

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// FreePorts returns n distinct TCP ports that were free on every address a
// moment ago. All n are held open together while they are chosen, so they
// differ from each other. They are taken below the kernel's range of
// ephemeral ports (ip_local_port_range), so that no outgoing connection of
// this machine's, whose source port the kernel takes from that range, can
// take one between the choice and the test's own bind.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	lo, hi := 10000, ephemeralLow()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if hi-lo >= 1000 && tries < 1000 {
			addr = fmt.Sprintf(":%d", lo+rand.IntN(hi-lo))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				tb.Fatal(err)
			}
			continue // taken
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// ephemeralLow is the first port of the kernel's ephemeral range; 0 where
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	lo, _ := strconv.Atoi(f[0])
	return lo
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
