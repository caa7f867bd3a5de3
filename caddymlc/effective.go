package caddymlc

// EffectiveModels returns the models the handler serves, each with the
// options it inherits from the handler and the defaults applied, exactly
// as Provision takes them; the error is Validate's. It is for tools that
// read a config without running it (caddy mlc-check).
func (h *Handler) EffectiveModels() ([]ModelConfig, error) { return h.models() }
