//go:build unix && !linux

package mlcstack

import (
	"os/exec"
	"syscall"
)

// setGroup starts cmd in a process group of its own, so that killGroup
// also ends what it started (the device probe MLC runs in a subprocess).
func setGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's process group.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
