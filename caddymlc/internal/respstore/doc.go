// Package respstore keeps the Responses API's stored responses: the
// router's responsestore.Store (router/responsestore), the one interface
// its Responses path uses, in an embedded SQLite file (SQLite:
// modernc.org/sqlite, pure Go, no cgo, one file shared by the processes
// that open it) or in the cluster's Redis (Redis), shared by the
// replicas. Records are opaque bytes, keyed by tenant and id, each kept
// for the store's retention time (TTL) and forgotten after it.
//
// The Caddy adapter chooses and opens the store; the package sits above
// router/, whose interface it implements, and imports cluster/ for the
// Redis connection.
package respstore
