//go:build unix && !linux

package engine

import "syscall"

// sysProcAttr puts the child in its own process group, so that Stop can
// signal everything it spawned. Without Linux's Pdeathsig, children may
// outlive a parent that is killed with SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
