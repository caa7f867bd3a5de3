package engine

import "syscall"

// sysProcAttr has nothing to add on Windows: there are no process groups
// to signal and no parent-death signal, so children may outlive a killed
// parent.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills the process itself: Windows has no SIGTERM.
func (p *process) signalGroup(syscall.Signal) {
	_ = p.cmd.Process.Kill()
}
