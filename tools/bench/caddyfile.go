package main

import (
	"fmt"
	"slices"
	"strings"
)

// The Caddyfiles of the parties. Each Caddy has its own admin address (the
// profile and the allocation counts come from it), keeps no autosaved
// config and no certificates, and logs as a user's would, at Caddy's
// default level.

// caddyfileWith is a whole Caddyfile: the global options, with more of
// them (global, indented once), then one site on 127.0.0.1:port handled
// by handler.
func caddyfileWith(adminPort, port int, storage string, h2c bool, global, handler string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin 127.0.0.1:%d\n\tpersist_config off\n\tauto_https off\n\tstorage file_system %s\n", adminPort, storage)
	b.WriteString(global)
	if h2c {
		// Unencrypted HTTP/2 lets many idle streams share a few client
		// connections, so the file limit holds twice as many.
		b.WriteString("\tservers {\n\t\tprotocols h1 h2c\n\t}\n")
	}
	fmt.Fprintf(&b, "}\n\nhttp://127.0.0.1:%d {\n\tbind 127.0.0.1\n%s}\n", port, indent(handler))
	return b.String()
}

// reverseProxy is Caddy's own reverse proxy over the engines, the
// baseline a router is held to.
func reverseProxy(engines []string) string {
	return fmt.Sprintf("reverse_proxy %s {\n\tlb_policy round_robin\n}\n", strings.Join(engines, " "))
}

// mlcWhole is an mlc_router in mode whole over endpoints (each an
// endpoint's arguments), with more options (lines of its block). The
// engines keep no prefix cache unless an option says (see cacheOff).
func mlcWhole(endpoints []string, options ...string) string {
	var b strings.Builder
	b.WriteString("mlc_router {\n\tmodel tiny\n\tmode whole\n" + cacheOff(options))
	for _, e := range endpoints {
		fmt.Fprintf(&b, "\tendpoint %s\n", e)
	}
	for _, o := range options {
		fmt.Fprintf(&b, "\t%s\n", o)
	}
	b.WriteString("}\n")
	return b.String()
}

// cacheOff is the line that turns the prefix cache off, unless options
// set it: the parties are compared on the same work, and the engines the
// bench starts itself run without one too (fleet.go), unless a run asks
// (the agent sessions), which the router is told.
func cacheOff(options []string) string {
	if slices.ContainsFunc(options, func(o string) bool { return strings.HasPrefix(o, "prefix_cache ") }) {
		return ""
	}
	return "\tprefix_cache disable\n"
}

// external is the endpoints of engines the router does not spawn.
func external(engines []string) []string {
	out := make([]string, len(engines))
	for i, e := range engines {
		out[i] = e + " external"
	}
	return out
}

// onPorts is the addresses of engines on ports of 127.0.0.1.
func onPorts(ports []int) []string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return out
}

// mlcRouter is an mlc_router in mode whole over external engines.
// A non-zero engineTimeout replaces the router's default.
func mlcRouter(engines []string, engineTimeout string) string {
	if engineTimeout == "" {
		return mlcWhole(external(engines))
	}
	return mlcWhole(external(engines), "engine_timeout "+engineTimeout)
}

// mlcDisagg is an mlc_router in mode disagg: the first engine prefills,
// the second decodes.
func mlcDisagg(prefill, decode string) string {
	return fmt.Sprintf("mlc_router {\n\tmodel tiny\n\tmode disagg\n"+cacheOff(nil)+
		"\tendpoint %s role prefill external\n\tendpoint %s role decode external\n}\n", prefill, decode)
}

func indent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) != "" {
			b.WriteByte('\t')
		}
		b.WriteString(line)
	}
	return b.String()
}

// tenantHeaders are the options that take the tenant and the band from
// the request's headers.
var tenantHeaders = []string{
	"tenant {http.request.header." + headerTenant + "}",
	"priority {http.request.header." + headerPriority + "}",
}

// mlcTenants is the fairness run's router: mode whole over two built-in
// engines it spawns on enginePorts, each running fairBatch sequences at
// once, the tenant and the band from the request's headers. gate false
// turns the router's admission bound off (max_inflight off): the engines
// get every request at once and queue them themselves.
func mlcTenants(enginePorts []int, gate bool) string {
	options := append([]string{fmt.Sprintf("engine_args --overrides max_num_sequence=%d", fairBatch)}, tenantHeaders...)
	if !gate {
		options = append(options, "max_inflight off")
	}
	return mlcWhole(onPorts(enginePorts), options...)
}

// clusterOption is the mlc global option that makes replicas share their
// gates' in-flight counts and budgets through the redis-server on
// redisPort (issue 28).
func clusterOption(redisPort, replicas int) string {
	return fmt.Sprintf("\tmlc {\n\t\tcluster {\n\t\t\tredis 127.0.0.1:%d\n\t\t\treplicas %d\n\t\t}\n\t}\n", redisPort, replicas)
}

// mlcTenantsExternal is mlcTenants for the replicas that do not spawn the
// engines: the same engines, external, each running at most fairBatch of
// the replica's requests, as the spawning replica reads from its
// engine_args.
func mlcTenantsExternal(enginePorts []int) string {
	return mlcWhole(external(onPorts(enginePorts)), append([]string{fmt.Sprintf("max_inflight %d", fairBatch)}, tenantHeaders...)...)
}

// mlcBudget is the budgets run's router: mode whole over external
// engines, the tenant from its header, each tenant its own budget of
// limit tokens a minute.
func mlcBudget(engines []string, limit int) string {
	return mlcWhole(external(engines), tenantHeaders[0], fmt.Sprintf("budget * tokens_per_minute %d", limit))
}
