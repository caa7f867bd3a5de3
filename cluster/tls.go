package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// TLSFiles are the files and names a TLS connection to Redis is made
// with (the adapter's cluster tls option).
type TLSFiles struct {
	// ServerName is the name Redis's certificate must carry (default:
	// the host of Redis's address).
	ServerName string
	// CA is a PEM file of the certificates that sign Redis's (default:
	// the system's).
	CA string
	// ClientCert and ClientKey are a PEM certificate and key the replica
	// presents.
	ClientCert, ClientKey string
	// InsecureSkipVerify accepts any certificate: for tests only.
	InsecureSkipVerify bool
}

// Config is the TLS client config to Redis at addr.
func (t TLSFiles) Config(addr string) (*tls.Config, error) {
	host, _, _ := net.SplitHostPort(addr)
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // the operator's choice, documented as for tests
	if t.ServerName != "" {
		cfg.ServerName = t.ServerName
	}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("cluster: tls ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster: tls ca %s: no PEM certificate in it", t.CA)
		}
	}
	if (t.ClientCert == "") != (t.ClientKey == "") {
		return nil, fmt.Errorf("cluster: tls: client_cert and client_key go together")
	}
	if t.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(t.ClientCert, t.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("cluster: tls client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
