package tokenizer

import (
	"encoding/json"
	"fmt"
)

// A postProcessor adds a model's special tokens around an encoded
// sequence (EncodeSpecial with addSpecial). Only single sequences are
// supported; pairs are not needed for generation.
type postProcessor interface {
	process(ids []int) []int
}

// postProcessorKind reads tokenizer.json's "post_processor".
var postProcessorKind = componentKind[postProcessor]{
	name:    "post_processor",
	members: func(c *componentJSON) []json.RawMessage { return c.Processors },
	seq:     func(m []postProcessor) postProcessor { return postProcessorSeq(m) },
	build:   buildPostProcessor,
}

// buildPostProcessor builds a post-processor of any type but Sequence.
func buildPostProcessor(c *componentJSON) (postProcessor, error) {
	switch c.Type {
	case "ByteLevel":
		// Only adjusts offsets, which this package does not compute.
		return nil, nil
	case "TemplateProcessing":
		var t template
		for _, p := range c.Single {
			switch {
			case p.SpecialToken != nil:
				st, ok := c.SpecialTokens[p.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("post_processor TemplateProcessing: special token %q undefined", p.SpecialToken.ID)
				}
				t = append(t, st.IDs...)
			case p.Sequence != nil:
				t = append(t, -1)
			}
		}
		return t, nil
	case "BertProcessing", "RobertaProcessing":
		var cls, sep [2]json.RawMessage
		if err := json.Unmarshal(c.Cls, &cls); err != nil {
			return nil, fmt.Errorf("post_processor %s cls: %w", c.Type, err)
		}
		if err := json.Unmarshal(c.Sep, &sep); err != nil {
			return nil, fmt.Errorf("post_processor %s sep: %w", c.Type, err)
		}
		var clsID, sepID int
		if err := json.Unmarshal(cls[1], &clsID); err != nil {
			return nil, fmt.Errorf("post_processor %s cls id: %w", c.Type, err)
		}
		if err := json.Unmarshal(sep[1], &sepID); err != nil {
			return nil, fmt.Errorf("post_processor %s sep id: %w", c.Type, err)
		}
		return template{clsID, -1, sepID}, nil
	default:
		return nil, fmt.Errorf("post_processor %q: %w", c.Type, errUnsupported)
	}
}

// postProcessorSeq applies its members in order.
type postProcessorSeq []postProcessor

func (q postProcessorSeq) process(ids []int) []int {
	for _, p := range q {
		ids = p.process(ids)
	}
	return ids
}

// template is a single-sequence template: token ids, with -1 standing
// for the sequence itself.
type template []int

func (t template) process(ids []int) []int {
	out := make([]int, 0, len(ids)+len(t))
	for _, id := range t {
		if id == -1 {
			out = append(out, ids...)
		} else {
			out = append(out, id)
		}
	}
	return out
}
