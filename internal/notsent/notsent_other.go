//go:build !linux

package notsent

import "net"

// setNotSentLowat does nothing where TCP_NOTSENT_LOWAT is not Linux's: a
// client that stops reading is let go once the socket's buffer is full.
func setNotSentLowat(*net.TCPConn, int) {}
