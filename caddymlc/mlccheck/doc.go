// Package mlccheck is `caddy mlc-check`: a conformance check of the engines
// an mlc_router config names, made before traffic. It reads the config
// (a Caddyfile or JSON), finds every mlc_router handler in it, and talks to
// each router's engines directly, as the router would, without routing a
// client's request: every engine serves the model, completes a prompt the
// same whole and streamed, holds the context the router assumes; in
// disagg mode each pair of prefill and decode engines gives, through
// prep_recv, remote_send and start_generate, exactly the text one engine
// gives alone, with and without a prefix the decode engine already holds;
// the KV metadata fits the decode engine's PE, the engines agree on their
// NVSHMEM world, and request ids (the user field) behave as the router
// relies on. Each check is a row (pass, fail or skipped, with the engines
// and the reason); the command exits 0 only when none failed.
//
// With `engine mlc` only MLC's own API is used; the checks of caddy-mlc's
// extensions (the NVSHMEM world report, POST /microserving/release) are
// skipped, and say so. With --start the command starts the fleet itself,
// as the mlc app would, and stops everything it started before it exits.
package mlccheck
