package cluster

// ShareLoad shares model's in-flight requests with the other replicas,
// until Stop.
func (s *Sharing) ShareLoad(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loads == nil || s.loads[model] != nil {
		return // stopped, or shared already
	}
	s.loads[model] = s.conn.ShareCount(s.conn.Key(model, "inflight"),
		func() int { return inFlight(s.live, model) },
		func(peers Peers) { s.live.SetPeerLoad(model, peers.Sum, peers.Busy) })
}
