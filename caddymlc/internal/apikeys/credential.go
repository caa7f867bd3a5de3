package apikeys

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// KeyHeaders are the headers Presented reads.
func KeyHeaders() []string { return []string{"Authorization", "X-Api-Key", "Api-Key"} }

// Presented is the API key req carries where clients send one:
// Authorization: Bearer (OpenAI), x-api-key (Anthropic), api-key (Azure
// OpenAI).
func Presented(req *http.Request) string {
	if auth := req.Header.Get("Authorization"); auth != "" {
		if scheme, key, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(key)
		}
	}
	if key := req.Header.Get("X-Api-Key"); key != "" {
		return key
	}
	return req.Header.Get("Api-Key")
}

// RefusalError is OpenAI's 401 for a key Lookup refused for why.
func RefusalError(why string) *protocol.Error {
	msg := map[string]string{
		Missing: "no API key: send one as Authorization: Bearer <key>, x-api-key or api-key",
		Unknown: "incorrect API key provided",
		Expired: "the API key provided has expired",
	}[why]
	return protocol.Errorf(http.StatusUnauthorized, protocol.ErrTypeInvalidRequest, "%s", msg).WithCode("invalid_api_key")
}

// TenantDigest is what stands for a tenant's name that came from a
// credential: "key:" and the first 12 hex digits of its SHA-256. It is
// stable (one client keeps one tenant, its fairness and budgets) and
// tells nothing of the credential, so that it can be a metric label, a
// log field, an /mlc/engines entry, a Redis key or a store column.
func TenantDigest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "key:" + hex.EncodeToString(sum[:6])
}

// maxTenantBytes bounds a tenant's name: a header can be long, and the
// name is kept in the queue and the budgets while the tenant is active.
const maxTenantBytes = 256

// TenantName is the tenant that value, read from the placeholders of
// tmpl, names: the value, at most maxTenantBytes of it, or, when tmpl
// reads a credential (an API key header, a cookie), the value's
// TenantDigest, so that no consumer downstream (metrics, logs,
// /mlc/engines, traces, Redis, the responses store) ever holds the
// credential.
func TenantName(tmpl, value string) string {
	if value != "" && CredentialPlaceholder(tmpl) != "" {
		return TenantDigest(value)
	}
	if len(value) > maxTenantBytes {
		value = value[:maxTenantBytes]
	}
	return value
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

// CredentialHeader is the request header (canonical) whose credential
// tmpl reads, Cookie for a cookie; "" when it reads none.
func CredentialHeader(tmpl string) string {
	p := CredentialPlaceholder(tmpl)
	const header = "{http.request.header."
	switch {
	case p == "":
		return ""
	case strings.HasPrefix(strings.ToLower(p), header):
		return http.CanonicalHeaderKey(p[len(header) : len(p)-1])
	}
	return "Cookie"
}

// CredentialPlaceholder returns the first Caddy placeholder of tmpl that
// reads a credential (a credential header, a cookie), "" when none does.
func CredentialPlaceholder(tmpl string) string {
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
