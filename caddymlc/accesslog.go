package caddymlc

import (
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/apikeys"
)

// Caddy's access log shows a request's headers as they came in,
// redacting only Authorization, Proxy-Authorization and Cookie (none of
// them with log_credentials): an Anthropic client's X-Api-Key, an Azure
// client's Api-Key would be in every line. Caddy takes its copy of the
// request before any handler runs, so no handler can take a header out
// of it, and a log's filter is the user's to write. So, for a request
// mlc_router serves whose line would show a credential the handler
// reads, the handler skips Caddy's line (the log_skip variable) and
// writes it itself, through the same loggers, as Caddy's, with that
// credential REDACTED. The fields log_append adds are Caddy's own to
// read: the line carries the router's variables (mlc_*) instead, each
// under its name, as README's log_append lines name them.

// redactingLog writes the access log lines of the requests whose
// credentials Caddy's would show.
type redactingLog struct {
	// logger is Caddy's access logger (the http app's log.access); nil:
	// the handler is not in an http app.
	logger *zap.Logger
	// credentials are the headers the handler reads a credential from.
	credentials []string
}

// newRedactingLog is the access log of a handler provisioned in ctx that
// reads credentials from the headers named.
func newRedactingLog(ctx caddy.Context, credentials []string) *redactingLog {
	a := &redactingLog{credentials: credentials}
	for _, m := range ctx.Modules() {
		if app, ok := m.(*caddyhttp.App); ok && len(credentials) > 0 {
			// The logger the http app gives its servers' access logs
			// (ctx.Logger() alone, the handler's, reaches no log that
			// takes only the access logs).
			a.logger = ctx.Logger(app).Named("log.access")
		}
	}
	return a
}

// credentialHeaders are the headers h reads a credential from: the API
// key's, with keys; the one its tenant placeholder reads.
func (h *Handler) credentialHeaders() []string {
	var out []string
	if h.keys != nil {
		out = append(out, apikeys.KeyHeaders()...)
	}
	if name := apikeys.CredentialHeader(h.Tenant); name != "" && !slices.Contains(out, name) {
		out = append(out, name)
	}
	return out
}

// accessLine is the access log line of one request that the handler
// writes: w and req stand for the request's, recording what the line
// says.
type accessLine struct {
	log    *redactingLog
	logs   *caddyhttp.ServerLogConfig
	w      caddyhttp.ResponseRecorder
	req    *http.Request
	body   *countedBody
	logged *http.Request // as the line shows it
}

// take returns the line of req when its access log line would show a
// credential, and skips Caddy's; nil otherwise.
func (a *redactingLog) take(w http.ResponseWriter, req *http.Request) *accessLine {
	if a == nil || a.logger == nil {
		return nil
	}
	srv, _ := req.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Logs == nil || !logsHost(srv.Logs, req.Host) {
		return nil
	}
	if skip, _ := caddyhttp.GetVar(req.Context(), caddyhttp.LogSkipVar).(bool); skip {
		return nil
	}
	shown := slices.ContainsFunc(a.credentials, func(name string) bool {
		return req.Header.Get(name) != "" && (srv.Logs.ShouldLogCredentials || !redactedByCaddy(name))
	})
	if !shown {
		return nil
	}
	caddyhttp.SetVar(req.Context(), caddyhttp.LogSkipVar, true)
	l := &accessLine{log: a, logs: srv.Logs, w: caddyhttp.NewResponseRecorder(w, nil, nil), req: req, logged: a.redacted(req)}
	if req.Body != nil && req.Body != http.NoBody {
		l.body = &countedBody{ReadCloser: req.Body}
		l.req = req.WithContext(req.Context()) // a shallow copy, to count its body
		l.req.Body = l.body
	}
	return l
}

// redactedByCaddy says whether Caddy's access log redacts header name
// (unless log_credentials).
func redactedByCaddy(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Authorization", "Proxy-Authorization", "Cookie":
		return true
	}
	return false
}

// redacted is req as its line shows it: as it came in (Caddy keeps the
// method, URI and remote address before any handler changed them), the
// credentials REDACTED.
func (a *redactingLog) redacted(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	if orig, ok := req.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		r.Method, r.RemoteAddr, r.RequestURI = orig.Method, orig.RemoteAddr, orig.RequestURI
		if orig.URL != nil {
			u := *orig.URL
			r.URL = &u
		}
	}
	for _, name := range a.credentials {
		if _, ok := r.Header[http.CanonicalHeaderKey(name)]; ok {
			r.Header[http.CanonicalHeaderKey(name)] = []string{"REDACTED"}
		}
	}
	return r
}

// write writes the line, as Caddy's server writes its own: "handled
// request" at INFO (ERROR from a 500 on, or the log_level variable's
// level), to each logger the server names for the request.
func (l *accessLine) write() {
	ctx := l.req.Context()
	status := l.w.Status()
	level := zapcore.InfoLevel
	if status >= 500 {
		level = zapcore.ErrorLevel
	}
	if name, ok := caddyhttp.GetVar(ctx, caddyhttp.LogLevelVar).(string); ok {
		if lv, err := zapcore.ParseLevel(name); err == nil && lv >= zapcore.DebugLevel && lv <= zapcore.ErrorLevel {
			level = lv
		}
	}
	var fields []zap.Field
	for _, logger := range accessLoggers(l.log.logger, l.logs, l.req) {
		c := logger.Check(level, "handled request")
		if c == nil {
			continue
		}
		if fields == nil {
			fields = l.fields(status)
		}
		c.Write(fields...)
	}
}

// fields are the line's fields, as Caddy's.
func (l *accessLine) fields(status int) []zap.Field {
	ctx := l.req.Context()
	var userID string
	if repl, ok := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		userID, _ = repl.GetString("http.auth.user.id")
	}
	var took time.Duration
	if start, ok := caddyhttp.GetVar(ctx, "start_time").(time.Time); ok {
		took = time.Since(start)
	}
	read := 0
	if l.body != nil {
		read = l.body.n
	}
	fields := []zap.Field{
		zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: l.logged, ShouldLogCredentials: l.logs.ShouldLogCredentials}),
		zap.Int("bytes_read", read),
		zap.String("user_id", userID),
		zap.Duration("duration", took),
		zap.Int("size", l.w.Size()),
		zap.Int("status", status),
		zap.Object("resp_headers", caddyhttp.LoggableHTTPHeader{Header: l.w.Header(), ShouldLogCredentials: l.logs.ShouldLogCredentials}),
	}
	vars, _ := ctx.Value(caddyhttp.VarsCtxKey).(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		if strings.HasPrefix(name, "mlc_") {
			fields = append(fields, zap.Any(name, vars[name]))
		}
	}
	return fields
}

// countedBody counts the bytes read of a request's body.
type countedBody struct {
	io.ReadCloser
	n int
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}

// logsHost says whether the server logs the requests to host, as
// Caddy's server decides (its shouldLogRequest, which handlers cannot
// call): a host its logger names map, unless it skips it or every host
// not mapped.
func logsHost(logs *caddyhttp.ServerLogConfig, host string) bool {
	host = hostOnly(host)
	for name := range logs.LoggerNames {
		if certmagic.MatchWildcard(host, name) {
			return true
		}
	}
	for _, skip := range logs.SkipHosts {
		if certmagic.MatchWildcard(host, skip) {
			return false
		}
	}
	return !logs.SkipUnmappedHosts
}

// accessLoggers are the loggers the server writes the access log line
// of req to, as Caddy's server names them (its ServerLogConfig's
// wrapLogger, unexported): the access_logger_names variable's, else the
// logger names of req's host (an exact name, else a wildcard one), else
// the default.
func accessLoggers(base *zap.Logger, logs *caddyhttp.ServerLogConfig, req *http.Request) []*zap.Logger {
	var names []string
	if vals, ok := caddyhttp.GetVar(req.Context(), caddyhttp.AccessLoggerNameVarKey).([]any); ok {
		for _, v := range vals {
			name, _ := v.(string)
			names = append(names, name)
		}
	} else {
		names = loggerNames(logs, strings.ToLower(hostOnly(req.Host)))
	}
	out := make([]*zap.Logger, 0, len(names))
	for _, name := range names {
		if name == "" {
			out = append(out, base)
		} else {
			out = append(out, base.Named(name))
		}
	}
	return out
}

// loggerNames are the logger names of host: its own, else those of the
// first wildcard that matches it, label by label, else the default.
func loggerNames(logs *caddyhttp.ServerLogConfig, host string) []string {
	if names, ok := logs.LoggerNames[host]; ok {
		return names
	}
	labels := strings.Split(host, ".")
	for i := range labels {
		if labels[i] == "" {
			continue
		}
		labels[i] = "*"
		if names, ok := logs.LoggerNames[strings.Join(labels, ".")]; ok {
			return names
		}
	}
	return []string{logs.DefaultLoggerName}
}

// hostOnly is host without its port.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}
