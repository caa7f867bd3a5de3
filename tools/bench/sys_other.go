//go:build !linux

package main

import (
	"errors"
	"syscall"
	"time"
)

// The bench reads a process's CPU time and memory from /proc: Linux only.

var errNoProc = errors.New("the bench needs Linux's /proc")

func childAttr() *syscall.SysProcAttr { return nil }

func raiseFileLimit() (uint64, error) { return 0, errNoProc }

type procSample struct {
	cpu  time.Duration
	rss  int64
	peak int64
	fds  int
}

func readProc(int) (procSample, error) { return procSample{}, errNoProc }

func loadAverage() string { return "?" }
