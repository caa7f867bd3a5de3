// Package router is the routing core of caddy-mlc: it serves the
// OpenAI-compatible API of one or more models and turns each request into
// calls to MLC-LLM engines, disaggregated or whole, resuming what an
// engine preempts or fails. It imports no Caddy package; the caddymlc
// package adapts it to Caddy. It is what happens to a request; the
// engines' lifecycle (their processes, an operator's drain, rolling
// restarts, autoscaling, a retired fleet's drain, the operators' status)
// is package fleet's, which makes each fleet's Pool and acts on the
// routers through fleetapi.go; what replicas share through Redis is
// package cluster's.
//
// Its files follow a request in order:
//
//   - models.go: the front (Models.ServeHTTP): the path, the model named.
//   - serve.go: a request's way through, serve: decode, admit, run its
//     choices, record. An API is a value there (api): how its request
//     becomes a completion, and its sink. messages.go (Anthropic's
//     Messages API) and responses.go (OpenAI's Responses API) build on
//     chat (messages.go also counts a message's tokens); package
//     responsestore keeps responses (its Store; the adapter's
//     caddymlc/internal/respstore has SQLite's and Redis's),
//     responsesstored.go serves them by id. mcp.go runs the Responses
//     API's hosted MCP tools (on the servers package mcpclient allows)
//     between the rounds of an answer, each round served as a request
//     (rounds.go); mcpcalls.go calls the servers, mcpsink.go writes
//     the items.
//   - decode.go: decode and validate (decoder): the body, the model, the
//     prompt's tokens, the chat rendered (a chat that requires a tool
//     call gets its call's schema as its response format);
//     embeddings.go for /v1/embeddings.
//     facts.go: who the request is for, from outside its body;
//     allowed.go: the models its API key allows.
//   - admit.go: the gate: the tenant's budget, the fair queue in front of
//     the engines' batch; peerload.go takes off it what other replicas
//     run on the same engines; sloadmit.go holds back or refuses a
//     request no engine is predicted to serve within its latency target.
//     requesttimeout.go bounds a request's whole time.
//   - completion.go: the request's choices, each run by resume.go.
//   - resume.go: one choice's attempts (choiceJob.run): each started,
//     read to the client and closed; one preempted or failed is resumed
//     from the text delivered. enginewait.go sums what a choice waited on
//     others (the engines, the queue, a backoff), the rest being the
//     router's own time.
//   - strategy.go, disagg.go: an attempt per mode: whole (one engine's
//     /v1/completions) or disagg (prep_recv, remote_send, start_generate),
//     each returning an attempt; release.go gives reservations back;
//     roles.go: the endpoints that prefill and those that decode;
//     decodeshort.go: a prefill engine generates what no decode engine
//     has room for.
//   - choose.go: choosing an engine (pick: tiers, then the policy) or
//     waiting for one (acquire).
//   - attempt.go: an attempt's stream and its Close; engineclient.go: the
//     calls, under a watchdog, and their verdicts; prefill.go: a long
//     prompt's prefill is work, not a stall; nodescriptors.go: no
//     descriptor left to reach an engine.
//   - sink.go: the answer out, streamed or whole, completion or chat,
//     behind serve.go's outcomeSink, which serialises the choices;
//     choicelogprobs.go the logprobs that go with the text;
//     messagessink.go a message and responsessink.go a response, over
//     eventstream.go's named events. In front of the chat-based APIs'
//     sinks, toolsink.go reads tool calls out of the text (with the
//     model's parser, package toolcall) and thinksink.go a model's
//     reasoning (Messages' thinking blocks). keepalive.go: a stream that
//     waits says so; cachedtokens.go: the usage's cached tokens.
//
// Around them: router.go (Router, Config, New, reloads), live.go (Live:
// what the routers of a process share; notifier.go wakes those that
// wait), pool.go (Pool: a fleet's engines as the routers see them, over
// the narrow Processes of package fleet's engines, and the Handle a
// router reaches it by), policy.go and policies.go (the selection policy API and the
// built-in ones), sloaware.go (the slo_aware policy), latency.go and
// ewls.go (each engine's latency model, learned online), attainment.go
// (the share of requests that met their latency targets), hooks.go (a
// route's lifecycle hooks), prefix.go (the prefix index), prefixhits.go
// and prefixmoves.go (how well it predicts), session.go (a session's
// turns back to the engine of its last), cacheaccount.go (what the
// router expected each engine's cache to hold against what it reused),
// prefixshare.go, sessionshare.go and peerload.go (the prefix events,
// the sessions routed and the gate's share that package cluster carries
// between replicas), upstream.go, proc.go, breaker.go and
// engineload.go (an engine as the router knows it: its counts, health,
// and what it says of its load), rotation.go (an engine out of rotation:
// no attempt is given it, those on it move when told), fleetapi.go (what
// package fleet reads of the routers and acts on), status.go (the
// routers' part of what operators read), metrics.go, trace.go.
package router
