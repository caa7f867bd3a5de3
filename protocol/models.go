package protocol

// ModelCard describes one model: an element of GET /v1/models, and the
// body of GET /v1/models/{id}.
type ModelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelCard `json:"data"`
}

// NewModelCard describes model id.
func NewModelCard(created int64, ownedBy, id string) ModelCard {
	return ModelCard{ID: id, Object: "model", Created: created, OwnedBy: ownedBy}
}

// NewModelList lists the given model ids.
func NewModelList(created int64, ownedBy string, ids ...string) ModelList {
	l := ModelList{Object: "list", Data: []ModelCard{}}
	for _, id := range ids {
		l.Data = append(l.Data, NewModelCard(created, ownedBy, id))
	}
	return l
}
