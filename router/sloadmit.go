package router

// SLOAdmission is what the gate does with a request whose time to first
// token is predicted to miss its target on every engine.
type SLOAdmission struct {
	// Shed holds such a request back: it waits in the gate while waiting
	// can still meet its target, and is refused otherwise. false: it is
	// served, late.
	Shed bool
}

// On says whether the gate admits against targets.
func (a SLOAdmission) On() bool { return a.Shed }
