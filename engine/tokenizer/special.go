package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
)

// tokenRef is a token in tokenizer_config.json: a string or an
// AddedToken object.
type tokenRef struct{ content string }

func (r *tokenRef) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &r.content)
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	r.content = obj.Content
	return nil
}

func (t *HF) applyConfig(data []byte) error {
	var cfg struct {
		BOS tokenRef `json:"bos_token"`
		EOS tokenRef `json:"eos_token"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return err
	}
	if cfg.BOS.content != "" {
		id, ok := t.TokenID(cfg.BOS.content)
		if !ok {
			return fmt.Errorf("bos_token %q is not a token", cfg.BOS.content)
		}
		t.bos = id
	}
	if cfg.EOS.content != "" {
		id, ok := t.TokenID(cfg.EOS.content)
		if !ok {
			return fmt.Errorf("eos_token %q is not a token", cfg.EOS.content)
		}
		t.addEOS(id)
	}
	return nil
}

func (t *HF) applyGenerationConfig(data []byte) error {
	var cfg struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return err
	}
	if isNull(cfg.EOS) {
		return nil
	}
	var ids []int
	if cfg.EOS[0] == '[' {
		if err := json.Unmarshal(cfg.EOS, &ids); err != nil {
			return fmt.Errorf("eos_token_id: %w", err)
		}
	} else {
		var id int
		if err := json.Unmarshal(cfg.EOS, &id); err != nil {
			return fmt.Errorf("eos_token_id: %w", err)
		}
		ids = []int{id}
	}
	for _, id := range ids {
		t.addEOS(id)
	}
	return nil
}

func (t *HF) addEOS(id int) {
	if slices.Contains(t.eos, id) {
		return
	}
	t.eos = append(t.eos, id)
}

// BOSTokenID returns the id of tokenizer_config.json's bos_token.
func (t *HF) BOSTokenID() (int, bool) { return t.bos, t.bos >= 0 }

// EOSTokenIDs returns the ids that end generation: tokenizer_config.json's
// eos_token followed by generation_config.json's eos_token_id entries,
// without repeats. It is empty when Load found neither; the slice must
// not be modified.
func (t *HF) EOSTokenIDs() []int { return t.eos }
