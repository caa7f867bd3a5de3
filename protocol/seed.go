package protocol

// ChoiceSeed is the seed choice i of a request for n choices samples
// with, as MLC's engine seeds them (cpp/serve/engine.cc, AddRequest): the
// request's seed for a single choice, seed+i+1 for branch i of several.
// A router that sends each choice as a request of its own sends it this
// seed, and gets the text one engine gives for all n.
func ChoiceSeed(seed int64, n, i int) int64 {
	if n > 1 {
		return seed + int64(i) + 1
	}
	return seed
}
