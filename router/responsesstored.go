package router

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/responsestore"
)

// Stored responses, by id: GET /v1/responses/{id} returns one,
// DELETE /v1/responses/{id} forgets it, GET
// /v1/responses/{id}/input_items lists its input items. Each is the
// requesting tenant's only: another tenant's id is a 404, as an unknown
// one is.

// Bounds of a page of input items, OpenAI's.
const (
	defaultItemsLimit = 20
	maxItemsLimit     = 100
)

// serveStored answers the paths under /v1/responses/.
func (m *Models) serveStored(w http.ResponseWriter, req *http.Request) {
	rest := strings.TrimPrefix(req.URL.Path, protocol.PathResponses+"/")
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case id == "" || sub != "" && sub != "input_items":
		protocol.Errorf(http.StatusNotFound, protocol.ErrTypeNotFound, "unknown URL %s %s: stored responses are at %s/{id} and %s/{id}/input_items",
			req.Method, req.URL.Path, protocol.PathResponses, protocol.PathResponses).WithCode(protocol.CodeUnknownURL).Write(w)
		return
	case sub == "" && !allowMethod(w, req, http.MethodGet, http.MethodDelete):
		return
	case sub != "" && !allowMethod(w, req, http.MethodGet):
		return
	case m.responses == nil:
		responsestore.None("").Write(w)
		return
	}
	tenant := factsOf(req.Context()).Tenant
	log := m.def.logger.With(zap.String("response_id", id), zap.String("tenant", tenant))
	if req.Method == http.MethodDelete {
		ctx, cancel := context.WithTimeout(req.Context(), responsestore.Timeout)
		defer cancel()
		deleted, err := m.responses.Delete(ctx, tenant, id)
		log.Debug("delete stored response", zap.Bool("deleted", deleted), zap.Error(err))
		switch {
		case err != nil:
			responsestore.Error("deleting", id, err).Write(w)
		case !deleted:
			responsestore.NotFound(id, "").Write(w)
		default:
			protocol.WriteJSON(w, http.StatusOK, protocol.ResponseDeleted{ID: id, Object: protocol.ObjectResponse, Deleted: true})
		}
		return
	}
	if sub == "" && req.URL.Query().Get("stream") == "true" {
		protocol.InvalidRequest("stream", "streaming a stored response again is not supported by this server").WithCode(protocol.CodeUnsupportedValue).Write(w)
		return
	}
	rec, apiErr := responsestore.Load(req.Context(), m.responses, tenant, id)
	log.Debug("read stored response", zap.Bool("found", rec != nil), zap.String("subpath", sub))
	switch {
	case apiErr != nil:
		apiErr.Write(w)
	case rec == nil:
		responsestore.NotFound(id, "").Write(w)
	case sub == "":
		protocol.WriteJSON(w, http.StatusOK, rec.Response)
	default:
		list, apiErr := itemsPage(rec.Input, req)
		if apiErr != nil {
			apiErr.Write(w)
			return
		}
		protocol.WriteJSON(w, http.StatusOK, list)
	}
}

// itemsPage is the page of items that the query of req asks for: order
// (desc, the default, or asc), after (an item id: the items after it in
// that order), limit (1 to 100, default 20).
func itemsPage(items []protocol.ResponseMessage, req *http.Request) (protocol.ResponseItemList, *protocol.Error) {
	q := req.URL.Query()
	limit := defaultItemsLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxItemsLimit {
			return protocol.ResponseItemList{}, protocol.InvalidRequest("limit", "limit must be an integer from 1 to %d, got %q", maxItemsLimit, s).WithCode(protocol.CodeInvalidValue)
		}
		limit = n
	}
	items = slices.Clone(items)
	switch q.Get("order") {
	case "", "desc":
		slices.Reverse(items)
	case "asc":
	default:
		return protocol.ResponseItemList{}, protocol.InvalidRequest("order", `order must be "asc" or "desc", got %q`, q.Get("order")).WithCode(protocol.CodeInvalidValue)
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(m protocol.ResponseMessage) bool { return m.ID == after })
		if i < 0 {
			return protocol.ResponseItemList{}, protocol.InvalidRequest("after", "after: no input item %q in this response", after).WithCode(protocol.CodeInvalidValue)
		}
		items = items[i+1:]
	}
	list := protocol.ResponseItemList{Object: "list", Data: items[:min(limit, len(items))], HasMore: len(items) > limit}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	return list, nil
}
