package notsent

import (
	"net"
	"syscall"
	"testing"
)

// Limit sets the option on a TCP connection, also through a wrapper
// that exposes it.
func TestLimitSetsTheSocketOption(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	Limit(wrapped{c}, 16<<10)
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := rc.Control(func(fd uintptr) { got, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpNotSentLowat) }); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if got != 16<<10 {
		t.Fatalf("TCP_NOTSENT_LOWAT = %d, want %d", got, 16<<10)
	}
}

// wrapped is a connection under a wrapper, as TLS's.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }
