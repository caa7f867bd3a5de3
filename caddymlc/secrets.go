package caddymlc

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// tenantDigest is what stands for a tenant's name that came from a
// credential: "key:" and the first 12 hex digits of its SHA-256. It is
// stable (one client keeps one tenant, its fairness and budgets) and
// tells nothing of the credential, so that it can be a metric label, a
// log field, an /mlc/engines entry, a Redis key or a store column.
func tenantDigest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "key:" + hex.EncodeToString(sum[:6])
}

// credentialHeader says whether a request header (any case) carries a
// credential.
func credentialHeader(name string) bool {
	switch strings.ToLower(name) {
	case "authorization", "proxy-authorization", "x-api-key", "api-key", "cookie":
		return true
	}
	return false
}

// credentialPlaceholder returns the first placeholder of tmpl that reads a
// credential (a credential header, a cookie), "" when none does.
func credentialPlaceholder(tmpl string) string {
	for rest := tmpl; ; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			return ""
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return ""
		}
		key := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		lower := strings.ToLower(key)
		switch {
		case strings.HasPrefix(lower, "http.request.cookie."):
			return "{" + key + "}"
		case strings.HasPrefix(lower, "http.request.header.") && credentialHeader(key[len("http.request.header."):]):
			return "{" + key + "}"
		}
	}
}
