package caddymlc

import (
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// parseGlobalOption reads the `mlc` global option: the mlc app's config.
//
//	{
//	    mlc {
//	        cluster { ... }   (see Cluster)
//	        keys    <file>    (the keys file of every mlc_router that names none; see Auth)
//	    }
//	}
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("mlc given twice in the global options")
	}
	var app App
	d.Next() // the option's name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "cluster":
			if app.Cluster != nil {
				return nil, d.Err("cluster given twice")
			}
			c, err := parseCluster(d)
			if err != nil {
				return nil, err
			}
			app.Cluster = c
		case "keys":
			if app.Keys != "" {
				return nil, d.Err("keys given twice")
			}
			if err := oneArg(d, &app.Keys); err != nil {
				return nil, err
			}
		default:
			return nil, d.Errf("mlc: unknown option %q (cluster, keys)", d.Val())
		}
	}
	var warnings []caddyconfig.Warning
	return httpcaddyfile.App{Name: "mlc", Value: caddyconfig.JSON(&app, &warnings)}, nil
}

// parseCluster reads the cluster block (see Cluster).
func parseCluster(d *caddyfile.Dispenser) (*Cluster, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	c := &Cluster{}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		if seen[name] {
			return nil, d.Errf("cluster: %s given twice", name)
		}
		seen[name] = true
		if err := c.parseOption(d, name); err != nil {
			return nil, err
		}
	}
	if err := c.validate(); err != nil {
		return nil, d.Err(err.Error())
	}
	return c, nil
}

// parseOption reads the cluster block's option name.
func (c *Cluster) parseOption(d *caddyfile.Dispenser, name string) error {
	switch name {
	case "redis":
		return oneArg(d, &c.Redis)
	case "username":
		return oneArg(d, &c.Username)
	case "password":
		return oneArg(d, &c.Password)
	case "key_prefix":
		return oneArg(d, &c.KeyPrefix)
	case "replicas":
		return countArg(d, "cluster: replicas", &c.Replicas, false)
	case "timeout":
		return durationArg(d, "cluster: timeout", &c.Timeout)
	case "tls":
		t, err := parseClusterTLS(d)
		if err != nil {
			return err
		}
		c.TLS = t
	default:
		return d.Errf("cluster: unknown option %q (redis, username, password, tls, key_prefix, replicas, timeout)", name)
	}
	return nil
}

// parseClusterTLS reads `tls [{ ... }]`.
func parseClusterTLS(d *caddyfile.Dispenser) (*ClusterTLS, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	t := &ClusterTLS{}
	files := map[string]*string{"server_name": &t.ServerName, "ca": &t.CA, "client_cert": &t.ClientCert, "client_key": &t.ClientKey}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if dst := files[d.Val()]; dst != nil {
			if err := oneArg(d, dst); err != nil {
				return nil, err
			}
			continue
		}
		if d.Val() != "insecure_skip_verify" {
			return nil, d.Errf("cluster tls: unknown option %q (server_name, ca, client_cert, client_key, insecure_skip_verify)", d.Val())
		}
		if d.NextArg() {
			return nil, d.ArgErr()
		}
		t.InsecureSkipVerify = true
	}
	return t, nil
}
