package engine

import "syscall"

// sysProcAttr puts the child in its own process group, so that Stop can
// signal everything it spawned, and asks the kernel to SIGKILL it when the
// thread that forked it dies (see spawner for why that thread lives as
// long as the fleet). Pdeathsig survives execve, so a wrapper script that
// execs the engine keeps it; grandchildren do not inherit it, but they are
// in the group that Stop kills.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
