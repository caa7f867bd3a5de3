package protocol

// ModelOf returns the top-level "model" of a request body, for routing it
// to the model's fleet before it is decoded: "" when the body has none
// (or null), or is not a JSON object of plain keys, which the model's own
// decoder then judges. A "model" that is not a plain string is reported
// with ok false.
func ModelOf(body []byte) (model string, ok bool) {
	s := jsonScanner{b: body}
	ok = true
	s.members(func(key []byte) bool {
		if string(key) != "model" {
			return s.skipValue()
		}
		if s.null() {
			return true
		}
		v, isString := s.plainString()
		if !isString {
			ok = false
			return false
		}
		model = string(v)
		return true
	})
	return model, ok
}
