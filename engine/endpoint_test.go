package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestDeviceIDStarts(t *testing.T) {
	for _, tc := range []struct{ gpus, want []int }{
		{[]int{1, 1}, []int{0, 1, 2}},
		{[]int{2, 2, 2}, []int{0, 2, 4, 6}},
		{[]int{2, 1, 1}, []int{0, 2, 3, 4}},
		{[]int{4}, []int{0, 4}},
		{nil, []int{0}},
	} {
		if got := DeviceIDStarts(tc.gpus); !slices.Equal(got, tc.want) {
			t.Errorf("DeviceIDStarts(%v) = %v, want %v", tc.gpus, got, tc.want)
		}
	}
}

func TestValidateEndpoints(t *testing.T) {
	ok := Endpoint{Host: "127.0.0.1", Port: 8080, GPUs: 1}
	with := func(f func(*Endpoint)) Endpoint { e := ok; f(&e); return e }
	for _, tc := range []struct {
		name string
		eps  []Endpoint
		want string // substring of the error; "" for valid
	}{
		{"valid", []Endpoint{ok, with(func(e *Endpoint) { e.Port = 8081; e.Role = RoleDecode })}, ""},
		{"none", nil, "no endpoints"},
		{"zero gpus", []Endpoint{with(func(e *Endpoint) { e.GPUs = 0 })}, "gpus must be at least 1"},
		{"port 0", []Endpoint{with(func(e *Endpoint) { e.Port = 0 })}, "out of range"},
		{"port too big", []Endpoint{with(func(e *Endpoint) { e.Port = 65536 })}, "out of range"},
		{"no host", []Endpoint{with(func(e *Endpoint) { e.Host = "" })}, "empty host"},
		{"bad role", []Endpoint{with(func(e *Endpoint) { e.Role = "both" })}, "unknown role"},
		{"duplicate", []Endpoint{ok, with(func(e *Endpoint) { e.GPUs = 2 })}, "endpoints 0 and 1 both use 127.0.0.1:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateEndpoints(tc.eps)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidSpec containing %q", err, tc.want)
			}
		})
	}
}

// Two names of one listening address are refused, naming both endpoints:
// at run time one engine would fail to bind while the other answered its
// readiness probe.
func TestValidateEndpointsAliases(t *testing.T) {
	ep := func(host string, port int) Endpoint { return Endpoint{Host: host, Port: port, GPUs: 1} }
	for _, tc := range []struct {
		name string
		eps  []Endpoint
		want string // substring of the error; "" for valid
	}{
		{"localhost", []Endpoint{ep("127.0.0.1", 8581), ep("localhost", 8581)},
			"endpoints 0 (127.0.0.1:8581) and 1 (localhost:8581) both listen on 127.0.0.1:8581"},
		{"ipv4 wildcard", []Endpoint{ep("127.0.0.2", 8581), ep("0.0.0.0", 8581)},
			"endpoints 0 (127.0.0.2:8581) and 1 (0.0.0.0:8581) both listen on 127.0.0.2:8581 (0.0.0.0 and :: listen on every address)"},
		{"ipv6 wildcard", []Endpoint{ep("::", 9000), ep("127.0.0.1", 8000), ep("localhost", 9000)},
			"endpoints 0 ([::]:9000) and 2 (localhost:9000)"},
		{"mapped ipv4", []Endpoint{ep("::ffff:127.0.0.1", 8581), ep("127.0.0.1", 8581)},
			"both listen on 127.0.0.1:8581"},
		{"other ports", []Endpoint{ep("127.0.0.1", 8581), ep("localhost", 8582), ep("0.0.0.0", 8583)}, ""},
		{"other addresses", []Endpoint{ep("127.0.0.1", 8581), ep("127.0.0.2", 8581), ep("::1", 8581)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateEndpoints(tc.eps)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidSpec containing %q", err, tc.want)
			}
		})
	}
}

func TestEndpointAddr(t *testing.T) {
	if got := (Endpoint{Host: "::1", Port: 80}).URL(); got != "http://[::1]:80" {
		t.Errorf("URL = %q", got)
	}
}

// An endpoint's address is a host and a port in 1..65535; anything else
// is refused with the address and what is wrong.
func TestParseAddr(t *testing.T) {
	for s, want := range map[string]struct {
		host string
		port int
		err  string
	}{
		"127.0.0.1:9001": {"127.0.0.1", 9001, ""},
		"[::1]:8080":     {"::1", 8080, ""},
		"localhost":      {"", 0, "want host:port"},
		"h:0":            {"", 0, "port must be a number in 1..65535"},
		"h:65536":        {"", 0, "port must be a number in 1..65535"},
		"h:http":         {"", 0, "port must be a number in 1..65535"},
		":9001":          {"", 0, "missing host"},
	} {
		host, port, err := ParseAddr(s)
		if want.err != "" {
			if err == nil || !strings.Contains(err.Error(), want.err) || !strings.Contains(err.Error(), s) {
				t.Errorf("%q: error %v, want one naming it with %q", s, err, want.err)
			}
			continue
		}
		if err != nil || host != want.host || port != want.port {
			t.Errorf("%q: %q %d %v, want %q %d", s, host, port, err, want.host, want.port)
		}
	}
}
