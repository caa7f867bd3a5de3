package mlcstack

import (
	"os/exec"
	"syscall"
)

// setGroup starts cmd in a process group of its own, so that killGroup
// also ends what it started (the device probe MLC runs in a subprocess),
// and has the kernel kill it if the test process dies without cleaning
// up (a test binary's timeout panic runs no Cleanup): a backend left
// behind would hold the machine's cores. The signal follows the thread
// that forked, which the Go runtime ends only under a goroutine that
// locked it and exited: good enough for a test's helpers (engine/ uses a
// dedicated thread for the fleet's engines, which must not die early).
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills cmd's process group.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
