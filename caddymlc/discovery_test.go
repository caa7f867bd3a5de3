package caddymlc

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// dnsServer answers A queries from a table the test changes.
type dnsServer struct {
	mu      sync.Mutex
	records map[string][]string // FQDN -> IPv4 addresses
	addr    string
}

func startDNS(t *testing.T) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dnsServer{records: map[string][]string{}, addr: pc.LocalAddr().String()}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(d.serve)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return d
}

func (d *dnsServer) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	d.mu.Lock()
	for _, q := range req.Question {
		if q.Qtype != dns.TypeA {
			continue
		}
		for _, ip := range d.records[q.Name] {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
				A:   net.ParseIP(ip),
			})
		}
	}
	d.mu.Unlock()
	_ = w.WriteMsg(m)
}

func (d *dnsServer) set(name string, ips ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records[name] = ips
}

// startWorld runs built-in engines on ips (all on port), one NVSHMEM world
// in that order, as an operator would run them for discovery.
func startWorld(t *testing.T, port int, ips ...string) {
	t.Helper()
	var peers []protocol.Peer
	for i, ip := range ips {
		peers = append(peers, protocol.Peer{PEStart: i, NPEs: 1, Addr: net.JoinHostPort(ip, strconv.Itoa(port))})
	}
	peersJSON, _ := json.Marshal(peers)
	for i, ip := range ips {
		cfg, _ := json.Marshal(protocol.NVSHMEMConfig{UID: []int{7, 7, 7}, NPEs: len(ips), PEStart: i})
		startEngineProc(t, net.JoinHostPort(ip, strconv.Itoa(port)),
			[]string{protocol.EnvNVSHMEMConfig + "=" + string(cfg), protocol.EnvBuiltinPeers + "=" + string(peersJSON)})
	}
}

// startEngineProc runs a built-in engine on addr (this test binary,
// re-executed), with env added and args appended, and waits until it
// answers.
func startEngineProc(t *testing.T, addr string, env []string, args ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(exe, append([]string{engine.BuiltinSubcommand, "tiny", "--enable-debug", "--mode", "server",
		"--host", host, "--port", port}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitAnswers(t, "http://"+addr)
}

// waitAnswers waits until an engine the test started answers.
func waitAnswers(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/v1/models")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start: %v", base, err)
		}
		time.Sleep(20 * time.Millisecond) // a process starting
	}
}

// waitRoles waits until the live router's dynamic engines are, by
// address, the given roles and ready.
func waitRoles(t *testing.T, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := map[string]string{}
		ready := true
		for _, rs := range liveNow().lifecycle.Statuses() {
			for _, e := range rs.Engines {
				if e.Dynamic {
					got[e.Addr] = e.Role
					ready = ready && e.State == "ready" && e.PEStart >= 0
				}
			}
		}
		if ready && fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dynamic engines %v (all ready and with their PE: %v), want %v", got, ready, want)
		}
		time.Sleep(20 * time.Millisecond) // DNS answers are re-read on an interval
	}
}

// Engines on 127.0.0.2-4, found through a DNS server the test runs: under
// load, a decode engine is added, one removed, and the roles swapped;
// no request fails and every text is exact.
func TestDynamicEnginesFromDNS(t *testing.T) {
	port := testnet.FreePort(t)
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	startWorld(t, port, ips...)
	d := startDNS(t)
	d.set("prefill.engines.test.", "127.0.0.2")
	d.set("decode.engines.test.", "127.0.0.3")
	httpPort := testnet.FreePort(t)
	source := func(role string) string {
		return fmt.Sprintf("\t\tdynamic %s a %s.engines.test. %d {\n\t\t\trefresh 100ms\n\t\t\tresolvers %s\n\t\t}\n", role, role, port, d.addr)
	}
	reloadSite(t, httpPort, "\t\tmode disagg\n"+source("prefill")+source("decode"))
	t.Cleanup(func() { stopCaddy(t) })
	at := func(ip string) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	waitRoles(t, map[string]string{at(ips[0]): "prefill", at(ips[1]): "decode"})

	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", httpPort), client: httpClient()}
	load := startLoad(t, s, 8)
	d.set("decode.engines.test.", "127.0.0.3", "127.0.0.4")
	waitRoles(t, map[string]string{at(ips[0]): "prefill", at(ips[1]): "decode", at(ips[2]): "decode"})
	load.waitMore(16)
	d.set("decode.engines.test.", "127.0.0.4")
	waitRoles(t, map[string]string{at(ips[0]): "prefill", at(ips[2]): "decode"})
	load.waitMore(16)
	d.set("prefill.engines.test.", "127.0.0.4")
	d.set("decode.engines.test.", "127.0.0.2", "127.0.0.3")
	waitRoles(t, map[string]string{at(ips[0]): "decode", at(ips[1]): "decode", at(ips[2]): "prefill"})
	load.waitMore(16)
	n := load.finish()
	t.Logf("%d requests while engines came, went and changed roles", n)
	for _, rs := range liveNow().lifecycle.Statuses() {
		for _, e := range rs.Engines {
			if !slices.Contains([]string{"prefill", "decode"}, e.Role) {
				t.Errorf("engine %+v", e)
			}
		}
	}
}
