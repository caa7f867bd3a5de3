//go:build linux

package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// procStat is what the tests need from /proc/<pid>/stat.
type procStat struct {
	pid, ppid, pgrp int
	state           string
}

// allProcs reads /proc/*/stat; processes that vanish meanwhile are skipped.
func allProcs(t *testing.T) []procStat {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var procs []procStat
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if i < 0 || len(f) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(s)[0])
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		procs = append(procs, procStat{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0]})
	}
	return procs
}

// assertNoChildren fails if this process has children, zombies included
// (the fleet must reap them), or if a live process remains in one of the
// groups.
func assertNoChildren(t *testing.T, groups ...int) {
	t.Helper()
	me := os.Getpid()
	for _, p := range allProcs(t) {
		if p.ppid == me {
			t.Errorf("child process %d (state %s) survived", p.pid, p.state)
		}
	}
	assertGroupsGone(t, groups...)
}

// assertGroupsGone fails if a live process remains in one of the groups. A
// zombie is dead already: whoever inherited it reaps it when it can.
func assertGroupsGone(t *testing.T, groups ...int) {
	t.Helper()
	for _, p := range allProcs(t) {
		for _, g := range groups {
			if g != 0 && p.pgrp == g && p.state != "Z" {
				t.Errorf("process %d of group %d survived", p.pid, g)
			}
		}
	}
}
