// Package caddymlc is the mlc_router Caddy module.
package caddymlc
