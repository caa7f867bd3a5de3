package caddymlc

import "github.com/caddy-mlc/caddy-mlc/engine"

// EffectiveModels returns the models the handler serves, each with the
// options it inherits from the handler and the defaults applied, exactly
// as Provision takes them; the error is Validate's. It is for tools that
// read a config without running it (caddy mlc-check).
func (r *Router) EffectiveModels() ([]ModelConfig, error) { return r.models() }

// FleetSpec is the engine fleet of an effective model (see
// EffectiveModels), as the mlc app starts it: built-in engines are this
// binary's mlc-engine subcommand.
func (m ModelConfig) FleetSpec() (engine.Spec, error) { return m.fleetSpec() }
