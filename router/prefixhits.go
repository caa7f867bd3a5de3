package router

import "github.com/prometheus/client_golang/prometheus"

// The prefix index's hit rate: of the prompt tokens a prefix-reading
// policy (prefix_aware) routed to an engine, how many the index expected
// that engine to hold in its prefix cache when it was picked. It is the
// router's view, counted per routing decision (a retried attempt is
// another); what the engines report they matched is theirs.

// newPrefixHitCounters returns caddy_mlc_prefix_prompt_tokens_total and
// caddy_mlc_prefix_hit_tokens_total.
func newPrefixHitCounters() (prompt, hit *prometheus.CounterVec) {
	prompt = newCounterVec("prefix_prompt_tokens_total",
		"Prompt tokens routed by a policy that reads the prefix index (prefix_aware), by model and the engine picked.", "model", "engine")
	hit = newCounterVec("prefix_hit_tokens_total",
		"Of prefix_prompt_tokens_total, the tokens the router's prefix index expected the picked engine to hold in its prefix cache, by model and engine.", "model", "engine")
	return prompt, hit
}

// countPrefixHit counts a routing decision of a prefix-reading policy:
// the prompt's tokens, and the picked engine's expected hit.
func (m *routerMetrics) countPrefixHit(model string, picked Candidate, promptTokens int) {
	m.prefixPrompt.WithLabelValues(model, picked.Addr).Add(float64(promptTokens))
	m.prefixHit.WithLabelValues(model, picked.Addr).Add(float64(max(picked.PrefixHit, 0)))
}
