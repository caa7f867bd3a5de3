package apikeys

import (
	"net/http"
	"strings"
	"testing"
)

// The placeholders that read a credential are found, in any case, and
// no other.
func TestCredentialPlaceholder(t *testing.T) {
	for tmpl, want := range map[string]string{
		"{http.request.header.Authorization}":       "{http.request.header.Authorization}",
		"team-{http.request.header.x-api-key}":      "{http.request.header.x-api-key}",
		"{http.request.header.Api-Key}":             "{http.request.header.Api-Key}",
		"{http.request.header.Cookie}":              "{http.request.header.Cookie}",
		"{http.request.cookie.session}":             "{http.request.cookie.session}",
		"{http.request.header.PROXY-AUTHORIZATION}": "{http.request.header.PROXY-AUTHORIZATION}",
		"{http.request.header.X-Tenant}":            "",
		"{http.auth.user.id}":                       "",
		"{http.request.remote.host}":                "",
		"{http.request.header.X-Tenant}-{unclosed":  "",
		"plain": "",
		"{http.request.header.X-Authorization-Extra}": "",
	} {
		if got := CredentialPlaceholder(tmpl); got != want {
			t.Errorf("%q: %q, want %q", tmpl, got, want)
		}
	}
	for tmpl, want := range map[string]string{
		"team-{http.request.header.x-api-key}": "X-Api-Key",
		"{HTTP.REQUEST.HEADER.authorization}":  "Authorization",
		"{http.request.cookie.session}":        "Cookie",
		"{http.request.header.X-Tenant}":       "",
	} {
		if got := CredentialHeader(tmpl); got != want {
			t.Errorf("the header of %q: %q, want %q", tmpl, got, want)
		}
	}
	if d := TenantDigest("Bearer k"); !strings.HasPrefix(d, "key:") || len(d) != len("key:")+12 || d != TenantDigest("Bearer k") || d == TenantDigest("Bearer l") {
		t.Errorf("digest %q: want key: and 12 hex digits, stable, distinct", d)
	}
}

// A key is read from each header clients send it in, Bearer first.
func TestPresented(t *testing.T) {
	for _, c := range []struct {
		header map[string]string
		want   string
	}{
		{map[string]string{"Authorization": "Bearer  sk-1 "}, "sk-1"},
		{map[string]string{"Authorization": "bearer sk-1"}, "sk-1"},
		{map[string]string{"Authorization": "Basic dXNlcg==", "X-Api-Key": "sk-2"}, "sk-2"},
		{map[string]string{"X-Api-Key": "sk-2", "Api-Key": "sk-3"}, "sk-2"},
		{map[string]string{"Api-Key": "sk-3"}, "sk-3"},
		{map[string]string{}, ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, "/v1/models", nil)
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		if got := Presented(req); got != c.want {
			t.Errorf("%v: %q, want %q", c.header, got, c.want)
		}
	}
	for _, why := range []string{Missing, Unknown, Expired} {
		e := RefusalError(why)
		if e.Status != http.StatusUnauthorized || e.Code == nil || *e.Code != "invalid_api_key" || e.Message == "" {
			t.Errorf("%s: %+v, want a 401 invalid_api_key with a message", why, e)
		}
	}
}

// A tenant read from a credential is its digest; any other is the value,
// bounded.
func TestTenantName(t *testing.T) {
	if got := TenantName("{http.request.header.Authorization}", "Bearer sk-1"); got != TenantDigest("Bearer sk-1") {
		t.Errorf("credential tenant %q, want its digest", got)
	}
	if got := TenantName("{http.request.header.Authorization}", ""); got != "" {
		t.Errorf("no credential: %q, want the default tenant", got)
	}
	if got := TenantName("{http.request.header.X-Tenant}", "team-a"); got != "team-a" {
		t.Errorf("plain tenant %q", got)
	}
	long := strings.Repeat("t", maxTenantBytes+10)
	if got := TenantName("{http.request.header.X-Tenant}", long); got != long[:maxTenantBytes] {
		t.Errorf("long tenant of %d bytes, want %d", len(got), maxTenantBytes)
	}
}
