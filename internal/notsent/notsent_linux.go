package notsent

import (
	"net"
	"syscall"
)

// tcpNotSentLowat is Linux's TCP_NOTSENT_LOWAT (linux/tcp.h), which the
// syscall package does not name.
const tcpNotSentLowat = 25

// setNotSentLowat bounds the unsent bytes the kernel queues for c; a
// failure leaves the socket as it was.
func setNotSentLowat(c *net.TCPConn, n int) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpNotSentLowat, n)
	})
}
