//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childAttr puts a child in its own process group, so that a Ctrl-C at the
// terminal reaches the bench only (which then stops the child in order),
// and kills it if the bench dies without stopping it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// raiseFileLimit lifts the bench's soft limit on open files to the hard
// limit; the children inherit it. It returns the limit in force.
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0, err
		}
	}
	return l.Cur, nil
}

// clockTick is USER_HZ, the unit of utime and stime in /proc; 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// procSample is what /proc says about a process at one moment.
type procSample struct {
	cpu  time.Duration // user + system time, all threads, so far
	rss  int64         // resident set, bytes
	peak int64         // the largest resident set so far, bytes
	fds  int           // open file descriptors
}

// readProc samples process pid.
func readProc(pid int) (procSample, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return procSample{}, err
	}
	var s procSample
	if s.cpu, err = parseStatCPU(string(stat)); err != nil {
		return procSample{}, err
	}
	if ns, ok := threadsRunTime(dir); ok {
		s.cpu = ns
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return procSample{}, err
	}
	if s.rss, err = parseStatusKB(string(status), "VmRSS:"); err != nil {
		return procSample{}, err
	}
	if s.peak, err = parseStatusKB(string(status), "VmHWM:"); err != nil {
		return procSample{}, err
	}
	if ents, err := os.ReadDir(dir + "/fd"); err == nil {
		s.fds = len(ents)
	}
	return s, nil
}

// parseStatCPU reads utime + stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name, field 2, is in parentheses and
// may hold spaces and parentheses itself, so fields count from the last
// ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errBadProc("stat", "no ')'")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, errBadProc("stat", "too few fields")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errBadProc("stat", "utime or stime is not a number")
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// threadsRunTime sums the time each thread of the process has spent on a
// CPU, from /proc/<pid>/task/*/schedstat, in nanoseconds: utime and stime
// count in clock ticks (10 ms), which is a sixth of a millisecond per
// request over a segment of 64 requests, as much as the differences
// measured. A thread that has exited is no longer counted (Go's runtime
// keeps its threads). It reports false when the kernel keeps no schedstat.
func threadsRunTime(dir string) (time.Duration, bool) {
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return 0, false
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread has just exited
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += time.Duration(ns)
	}
	return sum, sum > 0
}

// parseStatusKB reads a field in kB (VmRSS:, VmHWM:) from
// /proc/<pid>/status, in bytes.
func parseStatusKB(status, field string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, field)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, errBadProc("status", field+" is not in kB")
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, errBadProc("status", field+" is not a number")
		}
		return kb << 10, nil
	}
	return 0, errBadProc("status", "no "+field)
}

// loadAverage is the 1-minute load average from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func errBadProc(file, why string) error { return fmt.Errorf("/proc/<pid>/%s: %s", file, why) }
