package caddymlc

import (
	"errors"
	"fmt"
	"reflect"
)

// models returns the models the config serves, each with the inline
// options it does not set itself and the defaults applied, checked: one
// model for the single-model form, Models otherwise.
func (h *Handler) models() ([]ModelConfig, error) {
	if len(h.Models) == 0 {
		m := h.ModelConfig.withDefaults()
		if err := m.validate(); err != nil {
			return nil, err
		}
		return []ModelConfig{m}, nil
	}
	if h.Model != "" || len(h.Endpoints) > 0 || h.Dynamic != nil || h.Path != "" || h.EmbeddingModel != "" || h.EmbeddingModelName != "" {
		return nil, errors.New("mlc_router: with model blocks, name every model in its own block, with its own endpoints")
	}
	out := make([]ModelConfig, 0, len(h.Models))
	names := map[string]bool{}
	owner := map[string]string{} // endpoint address -> model
	defaults := 0
	for _, m := range h.Models {
		m = inherit(m, h.ModelConfig).withDefaults()
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("model %s: %w", m.Model, err)
		}
		if names[m.Model] {
			return nil, fmt.Errorf("mlc_router: model %s given twice", m.Model)
		}
		names[m.Model] = true
		if m.Default {
			defaults++
		}
		for _, ep := range m.Endpoints {
			if other, ok := owner[ep.Addr()]; ok {
				return nil, fmt.Errorf("mlc_router: endpoint %s belongs to models %s and %s: give each model its own engines", ep.Addr(), other, m.Model)
			}
			owner[ep.Addr()] = m.Model
		}
		out = append(out, m)
	}
	if defaults > 1 {
		return nil, errors.New("mlc_router: more than one model is marked default")
	}
	return out, checkEmbeddingNames(out)
}

// checkEmbeddingNames refuses an embedding model's name that another
// model or embedding model has: a client must reach one fleet by a name.
// A model may share its name with its own embedding model: completions
// go to the one, embeddings to the other.
func checkEmbeddingNames(ms []ModelConfig) error {
	owner := map[string]string{}
	for _, m := range ms {
		owner[m.Model] = m.Model
	}
	for _, m := range ms {
		name := m.EmbeddingModelName
		if name == "" || name == m.Model {
			continue
		}
		if other, ok := owner[name]; ok {
			return fmt.Errorf("mlc_router: the embedding model of %s is named %s, as is a model of %s: rename one (embedding_model %s name <name>)",
				m.Model, name, other, m.EmbeddingModel)
		}
		owner[name] = m.Model
	}
	return nil
}

// defaultModel returns the index of the model of requests that name
// none: the one marked default, else the first.
func defaultModel(ms []ModelConfig) int {
	for i, m := range ms {
		if m.Default {
			return i
		}
	}
	return 0
}

// inherit returns m with every option it leaves unset taken from
// shared, the options outside the model blocks; a model's name, path,
// default mark, embedding model, engines and dynamic sources are its own.
// Reflection keeps this in step with ModelConfig as options are added.
func inherit(m, shared ModelConfig) ModelConfig {
	own := map[string]bool{"Model": true, "Path": true, "Default": true, "EmbeddingModel": true,
		"EmbeddingModelLib": true, "EmbeddingModelName": true, "Endpoints": true, "Dynamic": true}
	dst, src := reflect.ValueOf(&m).Elem(), reflect.ValueOf(shared)
	for i := range dst.NumField() {
		f := dst.Type().Field(i)
		if own[f.Name] || !f.IsExported() || !dst.Field(i).IsZero() {
			continue
		}
		dst.Field(i).Set(src.Field(i))
	}
	return m
}
