package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The server name defaults to Redis's host; files that cannot serve are
// refused, naming what is wrong.
func TestTLSFilesConfig(t *testing.T) {
	cfg, err := TLSFiles{}.Config("redis.internal:6380")
	if err != nil || cfg.ServerName != "redis.internal" || cfg.RootCAs != nil || cfg.InsecureSkipVerify {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	if cfg, err = (TLSFiles{ServerName: "other"}).Config("redis.internal:6380"); err != nil || cfg.ServerName != "other" {
		t.Fatalf("server_name: %q, %v", cfg.ServerName, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for files, want := range map[TLSFiles]string{
		{CA: filepath.Join(t.TempDir(), "none.pem")}: "tls ca",
		{CA: notPEM}:                            "no PEM certificate",
		{ClientCert: "cert.pem"}:                "go together",
		{ClientKey: "key.pem"}:                  "go together",
		{ClientCert: notPEM, ClientKey: notPEM}: "client certificate",
	} {
		if _, err := files.Config("redis:6379"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error saying %q", files, err, want)
		}
	}
}
