package budget

import (
	"fmt"
	"strings"
)

// Rule is a budget of tenants.
type Rule struct {
	// Tenant is a tenant's name, or a pattern where * matches any run of
	// characters ("team-*"), or "*" alone for every tenant no other rule
	// matches. A name is matched before patterns, patterns in the order
	// of the rules, and "*" last.
	Tenant string `json:"tenant"`
	// TokensPerMinute is the budget of tokens (prompt and generated); 0
	// is none.
	TokensPerMinute int64 `json:"tokens_per_minute,omitempty"`
	// RequestsPerMinute is the budget of requests; 0 is none.
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	// Shared gives the tenants the rule matches one budget together
	// rather than one each.
	Shared bool `json:"shared,omitempty"`
}

func (r Rule) validate() error {
	switch {
	case r.Tenant == "":
		return fmt.Errorf("budget without a tenant")
	case r.TokensPerMinute < 0 || r.TokensPerMinute > MaxLimit:
		return fmt.Errorf("budget of %q: tokens_per_minute %d: must be between 1 and %d", r.Tenant, r.TokensPerMinute, MaxLimit)
	case r.RequestsPerMinute < 0 || r.RequestsPerMinute > MaxLimit:
		return fmt.Errorf("budget of %q: requests_per_minute %d: must be between 1 and %d", r.Tenant, r.RequestsPerMinute, MaxLimit)
	case r.TokensPerMinute == 0 && r.RequestsPerMinute == 0:
		return fmt.Errorf("budget of %q: neither tokens_per_minute nor requests_per_minute", r.Tenant)
	}
	return nil
}

// ruleSet finds the rule of a tenant.
type ruleSet struct {
	exact    map[string]*Rule
	patterns []*Rule
	fallback *Rule
}

func newRuleSet(rules []Rule) (*ruleSet, error) {
	s := &ruleSet{exact: map[string]*Rule{}}
	seen := map[string]bool{}
	for i := range rules {
		r := rules[i]
		if err := r.validate(); err != nil {
			return nil, err
		}
		if seen[r.Tenant] {
			return nil, fmt.Errorf("two budgets of %q", r.Tenant)
		}
		seen[r.Tenant] = true
		switch {
		case r.Tenant == "*":
			s.fallback = &r
		case strings.Contains(r.Tenant, "*"):
			s.patterns = append(s.patterns, &r)
		default:
			s.exact[r.Tenant] = &r
		}
	}
	return s, nil
}

// match returns the rule of tenant and the key of its bucket, or nil.
func (s *ruleSet) match(tenant string) (*Rule, string) {
	r := s.exact[tenant]
	if r == nil {
		for _, p := range s.patterns {
			if matchPattern(p.Tenant, tenant) {
				r = p
				break
			}
		}
	}
	if r == nil {
		r = s.fallback
	}
	switch {
	case r == nil:
		return nil, ""
	case r.Shared:
		return r, "rule:" + r.Tenant
	}
	return r, "tenant:" + tenant
}

// matchPattern reports whether name matches pattern, where * matches any
// run of characters: each piece between stars is found leftmost, which is
// enough for stars alone.
func matchPattern(pattern, name string) bool {
	pieces := strings.Split(pattern, "*")
	if !strings.HasPrefix(name, pieces[0]) {
		return false
	}
	name = name[len(pieces[0]):]
	last := pieces[len(pieces)-1]
	for _, p := range pieces[1 : len(pieces)-1] {
		i := strings.Index(name, p)
		if i < 0 {
			return false
		}
		name = name[i+len(p):]
	}
	return len(pieces) > 1 && strings.HasSuffix(name, last) || len(pieces) == 1 && name == ""
}
