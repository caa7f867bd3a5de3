//go:build !unix

package npmref

import "os/exec"

func inGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
