package caddymlc

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// The option values of the Caddyfile, read one way everywhere: name is
// how an error names the option.

// oneArg reads the option's single argument into dst.
func oneArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// choiceOption reads an option whose one value is among choices into
// the string field gives; another is an error that lists them.
func choiceOption(field func(*ModelConfig) *string, choices ...string) func(*ModelConfig, *caddyfile.Dispenser) error {
	return func(r *ModelConfig, d *caddyfile.Dispenser) error {
		name, dst := d.Val(), field(r)
		if err := oneArg(d, dst); err != nil {
			return err
		}
		if !slices.Contains(choices, *dst) {
			return choiceErr(d, name, *dst, choices)
		}
		return nil
	}
}

// onceArg is oneArg for an option that may be given once: seen holds
// the options already given.
func onceArg(d *caddyfile.Dispenser, seen map[string]bool, dst *string) error {
	name := d.Val()
	if seen[name] {
		return d.Errf("%s given twice", name)
	}
	seen[name] = true
	return oneArg(d, dst)
}

// setKey sets (*m)[k] to v, making the map first when there is none.
func setKey[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// countArg reads the option's single argument, an integer of at least 1
// (or, where off is allowed, "off" for -1), into dst.
func countArg(d *caddyfile.Dispenser, name string, dst *int, off bool) error {
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	if off && s == "off" {
		*dst = -1
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		if off {
			return d.Errf("%s %q: want an integer of at least 1, or off", name, s)
		}
		return d.Errf("%s %q: want an integer of at least 1", name, s)
	}
	*dst = n
	return nil
}

// durationArg reads the option's single argument, a positive duration,
// into dst.
func durationArg(d *caddyfile.Dispenser, name string, dst *caddy.Duration) error {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return durationArgsErr(d, name, args)
	}
	s := args[0]
	dur, err := positiveDuration(s)
	if err != nil {
		return d.Errf("%s %q: %v", name, s, err)
	}
	*dst = dur
	return nil
}

// durationArgsErr is the error of a duration option not given one
// word: a duration is written without spaces (15s, 1m30s).
func durationArgsErr(d *caddyfile.Dispenser, name string, args []string) error {
	joined := strings.Join(args, "")
	if _, err := caddy.ParseDuration(joined); err == nil && len(args) > 1 {
		return d.Errf("%s %s: write a duration as one word, without spaces: %s %s", name, strings.Join(args, " "), name, joined)
	}
	return d.Errf("%s: want one duration, such as 15s, 2m or 1h30m (a number and its unit, no space)", name)
}

// errNotPositive is the error of a duration of zero or less.
var errNotPositive = errors.New("must be positive")

// positiveDuration parses s as a Caddy duration above zero.
func positiveDuration(s string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if dur <= 0 {
		return 0, errNotPositive
	}
	return caddy.Duration(dur), nil
}
