//go:build linux

package main

import (
	"crypto/sha256"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestParseStatCountsFromTheLastParenthesis(t *testing.T) {
	// The command name holds a space and a parenthesis of its own.
	stat := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 1234 0 0"
	got, err := parseStatCPU(stat)
	if err != nil || got != 325*clockTick {
		t.Errorf("parseStatCPU = %v, %v; want %v", got, err, 325*clockTick)
	}
	if _, err := parseStatCPU("4242 (cmd) S 1 2"); err == nil {
		t.Error("a short stat line: no error")
	}
	status := "Name:\tcaddy\nVmPeak:\t 9 kB\nVmHWM:\t   4096 kB\nVmRSS:\t   2048 kB\n"
	rss, err := parseStatusKB(status, "VmRSS:")
	if err != nil || rss != 2048<<10 {
		t.Errorf("VmRSS = %d, %v; want %d", rss, err, 2048<<10)
	}
	if peak, err := parseStatusKB(status, "VmHWM:"); err != nil || peak != 4096<<10 {
		t.Errorf("VmHWM = %d, %v; want %d", peak, err, 4096<<10)
	}
	if _, err := parseStatusKB("Name:\tcaddy\n", "VmRSS:"); err == nil {
		t.Error("a status without VmRSS: no error")
	}
}

func TestReadProcSeesOwnWork(t *testing.T) {
	before, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the kernel has counted at least two ticks of it.
	sum := sha256.Sum256(nil)
	deadline := time.Now().Add(10 * time.Second)
	var after procSample
	for after.cpu < before.cpu+2*clockTick {
		if time.Now().After(deadline) {
			t.Fatalf("CPU time %v after 10 s of hashing, was %v", after.cpu, before.cpu)
		}
		for range 10000 {
			sum = sha256.Sum256(sum[:])
		}
		if after, err = readProc(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if after.rss <= 0 || after.fds <= 0 {
		t.Errorf("RSS %d, fds %d: want both positive", after.rss, after.fds)
	}
}

func TestRaiseFileLimitLiftsTheSoftLimitToTheHardOne(t *testing.T) {
	limit, err := raiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if l.Cur != l.Max || limit != l.Cur {
		t.Errorf("after raising: soft %d, hard %d, returned %d; want all equal", l.Cur, l.Max, limit)
	}
}
