package caddymlc

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/cluster"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// Cluster is the mlc app's cluster option: several Caddy replicas with the
// same mlc_router config share what they learn through one Redis server
// (see docs/scaling-out.md). Without it nothing is shared and no Redis
// code runs.
//
// Caddyfile (global options):
//
//	mlc {
//	    cluster {
//	        redis      <host:port>
//	        username   <name>                 (placeholders: {env.REDIS_USERNAME})
//	        password   <password>             (placeholders: {env.REDIS_PASSWORD})
//	        tls        [{ server_name <name>; ca <pem file>; client_cert <file>; client_key <file>; insecure_skip_verify }]
//	        key_prefix <prefix>               (default caddy-mlc)
//	        replicas   <n>                    (default 1)
//	        timeout    <duration>             (default 50ms)
//	    }
//	}
type Cluster struct {
	// Redis is the Redis server's host:port. Required.
	Redis string `json:"redis"`

	// Username and Password authenticate to Redis (AUTH), with Caddy's
	// placeholders replaced when the config is loaded: write
	// {env.REDIS_PASSWORD} rather than the password, which Caddy's admin
	// API would show with the config.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`

	// TLS, when set, encrypts the connection to Redis.
	TLS *ClusterTLS `json:"tls,omitempty"`

	// KeyPrefix begins every Redis key and channel of the cluster
	// (default caddy-mlc): clusters that share a Redis need their own.
	KeyPrefix string `json:"key_prefix,omitempty"`

	// Replicas is how many replicas share the budgets (default 1): while
	// Redis is out of reach each replica keeps its budgets alone, at
	// 1/Replicas of each limit, so that together they spend about the
	// limit.
	Replicas int `json:"replicas,omitempty"`

	// Timeout bounds each call to Redis made on a request's path
	// (default 50ms): past it the request goes on with local state.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// ClusterTLS is the TLS of the connection to Redis.
type ClusterTLS struct {
	// ServerName is the name Redis's certificate must carry (default:
	// the host of Redis's address).
	ServerName string `json:"server_name,omitempty"`
	// CA is a PEM file of the certificates that sign Redis's (default:
	// the system's).
	CA string `json:"ca,omitempty"`
	// ClientCert and ClientKey are a PEM certificate and key the replica
	// presents (Redis's tls-auth-clients).
	ClientCert string `json:"client_cert,omitempty"`
	ClientKey  string `json:"client_key,omitempty"`
	// InsecureSkipVerify accepts any certificate: for tests only.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// clusterConns are the connections to the clusters' Redis of every loaded
// config, by the options that make one: a `caddy reload` that keeps the
// option keeps the connection.
var clusterConns = caddy.NewUsagePool()

// clusterLink is a config's view of its cluster connection.
type clusterLink struct {
	conn     *cluster.Conn
	pooled   *pooledConn
	key      string // in clusterConns
	replicas int
}

// pooledConn is a connection in clusterConns, and what it shares of the
// process's routers and of their key checks: closed when no config holds
// it any more.
type pooledConn struct {
	*cluster.Conn
	sharing  *cluster.Sharing
	failures *cluster.FailedChecks // every site's and config's limiters follow it
}

// Destruct stops sharing prefixes and loads, and closes the connection.
func (p *pooledConn) Destruct() error {
	p.sharing.Stop()
	return p.Close()
}

// validate checks the option as written, before placeholders.
func (c *Cluster) validate() error {
	switch {
	case c.Redis == "":
		return fmt.Errorf("cluster: redis <host:port> is required")
	case c.Replicas < 0:
		return fmt.Errorf("cluster: replicas %d: want at least 1", c.Replicas)
	case c.Timeout < 0:
		return fmt.Errorf("cluster: timeout %s: must be positive", time.Duration(c.Timeout))
	}
	return nil
}

// provisionCluster connects (lazily: nothing is dialled before Start) to
// the option's Redis, or joins the connection a running config holds.
func provisionCluster(c *Cluster, live *router.Live, log *zap.Logger) (*clusterLink, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	repl := caddy.NewReplacer()
	opts := cluster.Options{
		Addr:     repl.ReplaceAll(c.Redis, ""),
		Username: repl.ReplaceAll(c.Username, ""),
		Password: repl.ReplaceAll(c.Password, ""),
		Prefix:   repl.ReplaceAll(c.KeyPrefix, ""),
		Timeout:  time.Duration(c.Timeout),
		Logger:   log.Named("cluster"),
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		// As written: a placeholder's value could be a secret.
		return nil, fmt.Errorf("cluster: redis %q: want host:port", c.Redis)
	}
	if c.TLS != nil {
		cfg, err := c.TLS.config(opts.Addr)
		if err != nil {
			return nil, err
		}
		opts.TLS = cfg
	}
	key, err := clusterKey(c, opts)
	if err != nil {
		return nil, err
	}
	val, _, err := clusterConns.LoadOrNew(key, func() (caddy.Destructor, error) {
		conn := cluster.New(opts)
		return &pooledConn{Conn: conn, sharing: cluster.NewSharing(conn, live), failures: cluster.NewFailedChecks(conn)}, nil
	})
	if err != nil {
		return nil, err
	}
	p := val.(*pooledConn)
	return &clusterLink{conn: p.Conn, pooled: p, key: key, replicas: max(c.Replicas, 1)}, nil
}

// clusterKey names a connection in clusterConns: a hash, so that the
// password is kept nowhere but in the connection.
func clusterKey(c *Cluster, o cluster.Options) (string, error) {
	b, err := json.Marshal(struct {
		Addr, Username, Password, Prefix string
		Timeout                          time.Duration
		TLS                              *ClusterTLS
	}{o.Addr, o.Username, o.Password, o.Prefix, o.Timeout, c.TLS})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "mlc-cluster/" + hex.EncodeToString(sum[:]), nil
}

// release lets go of the connection: the last config that held it closes
// it.
func (l *clusterLink) release() {
	if l != nil {
		_, _ = clusterConns.Delete(l.key)
	}
}

// config is the TLS client config to Redis at addr.
func (t *ClusterTLS) config(addr string) (*tls.Config, error) {
	return cluster.TLSFiles{ServerName: t.ServerName, CA: t.CA, ClientCert: t.ClientCert, ClientKey: t.ClientKey,
		InsecureSkipVerify: t.InsecureSkipVerify}.Config(addr)
}
