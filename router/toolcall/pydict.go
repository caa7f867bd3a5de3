package toolcall

// pyDict is an ordered map of JSON values: a Python dict's or a call's
// keyword arguments. Setting a key again keeps its first place and takes
// the new value, as a Python dict does.
type pyDict struct {
	keys  []string
	vals  [][]byte
	index map[string]int
}

func (d *pyDict) set(key string, val []byte) {
	if i, ok := d.index[key]; ok {
		d.vals[i] = val
		return
	}
	if d.index == nil {
		d.index = make(map[string]int)
	}
	d.index[key] = len(d.keys)
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, val)
}

// appendJSON appends the dict as a compact JSON object.
func (d *pyDict) appendJSON(out []byte) []byte {
	out = append(out, '{')
	for i, k := range d.keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, k)
		out = append(out, ':')
		out = append(out, d.vals[i]...)
	}
	return append(out, '}')
}
