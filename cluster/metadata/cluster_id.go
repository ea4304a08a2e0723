package metadata

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// The cluster id names the cluster whose data a directory holds. The
// first metadata primary of a new cluster mints it (a random UUID) and
// commits it with OpSetClusterID; it never changes afterwards, and
// snapshots keep it. Every node records it in its data directory once it
// learns it, and a peer that names another id is refused at the
// handshake: the two nodes belong to different clusters, whatever their
// node ids.

// OpSetClusterID records Command.Cluster as the cluster's id.
const OpSetClusterID Op = "set_cluster_id"

// ErrClusterIDSet refuses a second, different cluster id: the first one
// committed is the cluster's for good.
var ErrClusterIDSet = errors.New("metadata: cluster id already set")

// ClusterID is the cluster's UUID (zero: not minted yet).
type ClusterID [16]byte

// NewClusterID returns a fresh random id.
func NewClusterID() ClusterID { return ClusterID(uuid.New()) }

// String renders the canonical UUID text.
func (id ClusterID) String() string { return uuid.UUID(id).String() }

// MarshalText renders the canonical UUID text (used by JSON).
func (id ClusterID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the canonical UUID text.
func (id *ClusterID) UnmarshalText(b []byte) error {
	u, err := uuid.ParseBytes(b)
	if err != nil {
		return fmt.Errorf("cluster id: %w", err)
	}
	*id = ClusterID(u)
	return nil
}

// IsZero reports whether id is unset.
func (id ClusterID) IsZero() bool { return id == ClusterID{} }

// ClusterID is the cluster's id (zero until the first metadata primary
// committed one).
func (s *State) ClusterID() ClusterID { return s.clusterID }

// applySetClusterID sets the id once; the same id again is a no-op (two
// primaries of the first terms may both have proposed one: the first
// committed wins and the other is refused on every node alike).
func (s *State) applySetClusterID(c Command) (Result, error) {
	switch {
	case c.Cluster.IsZero():
		return Result{}, fmt.Errorf("%w: set_cluster_id without an id", ErrInvalidCommand)
	case s.clusterID.IsZero():
		s.clusterID = c.Cluster
	case s.clusterID != c.Cluster:
		return Result{}, fmt.Errorf("%w: the cluster is %s, not %s", ErrClusterIDSet, s.clusterID, c.Cluster)
	}
	return Result{}, nil
}
