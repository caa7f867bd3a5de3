// Package chaos is the fault suite of the router: its tests drive real
// built-in engine processes through Caddy (in process) and break them
// while they serve: a storm of streams on a tiny KV cache, engines killed
// (decode engines also under KV pressure), frozen with SIGSTOP, clients
// that disconnect at random points, an engine whose health probes are
// slow; and the public API's worst minute: engines
// that answer 200 and then chatter, garble, truncate or send HTML, huge
// prompts, clients that stop reading, bodies that never end, reloads a
// second apart that move the engines between port sets. Every scenario ends by checking that each
// request completed with the text of an undisturbed run (or ended with a
// clear error where completion was impossible), that the router's counts
// and every engine's KV pages and reservations are back to zero, that the
// goroutines are back to their baseline and that no engine process is
// left, and prints one summary line: requests, completed, errors, worst
// stall (the longest wait for a first token, and between two tokens of a
// stream; with -v, every wait over a second and when it began).
//
// `go test ./caddymlc/chaos` runs the short form (CI). The long form, with
// the sizes and the tight timing goals of the issue it came from, runs
// with -chaos.long:
//
//	go test ./caddymlc/chaos -chaos.long -v -timeout 60m
package chaos
