//go:build unix

package engine

import "syscall"

// signalGroup sends sig to the process's whole group. The group id stays
// reserved while any member lives, so this is safe after the leader exits.
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid, sig)
}
