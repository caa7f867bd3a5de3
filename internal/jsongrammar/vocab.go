package jsongrammar

import "slices"

// Vocab is a tokenizer's vocabulary as byte strings, in a trie.
type Vocab struct {
	size  int
	nodes []trieNode
	bytes int64
}

type trieNode struct {
	edges  []trieEdge // by byte
	tokens []int32    // the ids whose bytes end here
}

type trieEdge struct {
	b  byte
	to int32
}

// NewVocab returns the vocabulary whose token id i stands for the bytes
// tokens[i]; an empty string is a token the grammar never admits.
func NewVocab(tokens []string) *Vocab {
	v := &Vocab{size: len(tokens), nodes: []trieNode{{}}}
	for id, t := range tokens {
		cur := int32(0)
		for i := 0; i < len(t); i++ {
			cur = v.child(cur, t[i])
		}
		if cur != 0 {
			v.nodes[cur].tokens = append(v.nodes[cur].tokens, int32(id))
		}
	}
	for i := range v.nodes {
		v.bytes += int64(len(v.nodes[i].edges))*8 + int64(len(v.nodes[i].tokens))*4 + 48
	}
	return v
}

func (v *Vocab) child(n int32, b byte) int32 {
	edges := v.nodes[n].edges
	i, found := slices.BinarySearchFunc(edges, b, func(e trieEdge, b byte) int { return int(e.b) - int(b) })
	if found {
		return edges[i].to
	}
	v.nodes = append(v.nodes, trieNode{})
	to := int32(len(v.nodes) - 1)
	v.nodes[n].edges = slices.Insert(v.nodes[n].edges, i, trieEdge{b, to})
	return to
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// Bytes is about what the trie holds in memory.
func (v *Vocab) Bytes() int64 { return v.bytes }
