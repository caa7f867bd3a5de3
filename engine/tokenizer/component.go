package tokenizer

import (
	"encoding/json"
	"fmt"
)

// componentKind describes one kind of pipeline component: normalizer,
// pre-tokenizer, post-processor or decoder. tokenizer.json writes all
// four alike: null for none, a "Sequence" listing members of the same
// kind, or one concrete type, which build reads.
type componentKind[T any] struct {
	name    string                                 // the tokenizer.json key, for errors
	members func(*componentJSON) []json.RawMessage // a Sequence's member list
	seq     func([]T) T                            // a Sequence of built members
	build   func(*componentJSON) (T, error)        // any type but Sequence
}

// fromJSON builds the component described by raw; the zero T (none)
// when raw is null.
func (k componentKind[T]) fromJSON(raw json.RawMessage) (T, error) {
	var none T
	if isNull(raw) {
		return none, nil
	}
	c, err := decodeComponent(raw)
	if err != nil {
		return none, fmt.Errorf("%s: %w", k.name, err)
	}
	if c.Type != "Sequence" {
		return k.build(c)
	}
	var members []T
	for i, r := range k.members(c) {
		m, err := k.fromJSON(r)
		if err != nil {
			return none, fmt.Errorf("%s sequence item %d: %w", k.name, i, err)
		}
		// Members that do nothing (a null, ByteLevel's post-processor)
		// are left out.
		if any(m) != nil {
			members = append(members, m)
		}
	}
	return k.seq(members), nil
}
