package node

import (
	"errors"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/peerwire"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// Proposals a node hands to the metadata primary (peerwire Propose):
// a command that a part of this node decided but only the metadata
// primary can propose — today a partition primary's DeleteRecords,
// which must reach every replica through the metadata. The primary
// proposes only the ops in peerProposable, and answers each with a
// Proposed frame once it committed or failed.

// Bounds of the proposals in flight to the metadata primary.
const (
	// remoteProposalsMax bounds the proposals waiting for an answer;
	// one more is refused busy.
	remoteProposalsMax = 1024
)

// peerProposable are the ops the metadata primary proposes for a peer.
var peerProposable = map[metadata.Op]bool{metadata.OpDeleteRecords: true}

// remoteProposal is one proposal waiting for its answer.
type remoteProposal struct {
	done  func(error)
	timer *shard.Timer
}

// proposeAnywhere proposes cmd through the metadata group from any
// node: here on the metadata primary, else through the primary over the
// peer link; done runs on the metadata shard once it committed (nil) or
// failed. REQUIRES: on shard metaShard.
func (c *controller) proposeAnywhere(cmd metadata.Command, timeout time.Duration, done func(error)) {
	if err := c.admit(true); err == nil {
		c.propose(cmd, timeout, func(_ metadata.Result, err error) { done(err) })
		return
	} else if c.d.peers == nil || *c.d.peers == nil {
		done(err)
		return
	}
	primary, _ := c.d.metaRoute()
	if primary <= 0 || primary == int32(c.d.self) {
		done(service.Errorf(service.ErrMetadataNotReady, "no metadata primary is known to propose %s; retry shortly", cmd.Op))
		return
	}
	if len(c.remote) >= remoteProposalsMax {
		done(&partition.Error{Kind: partition.ErrBusy, Message: "too many proposals wait for the metadata primary; retry shortly"})
		return
	}
	c.remoteNext++
	id := c.remoteNext
	rp := &remoteProposal{done: done}
	rp.timer = c.sh.AfterFunc(timeout, func() {
		if c.remote[id] == rp {
			delete(c.remote, id)
			done(&partition.Error{Kind: partition.ErrTimedOut, Message: "the metadata primary did not answer the proposal in time; retry"})
		}
	})
	if c.remote == nil {
		c.remote = map[uint64]*remoteProposal{}
	}
	c.remote[id] = rp
	(*c.d.peers).Propose(primary, peerwire.Propose{ID: id, Node: int32(c.d.self), Command: cmd.Encode()})
}

// proposed answers the proposal of m.ID with m. REQUIRES: on shard
// metaShard.
func (c *controller) proposed(m peerwire.Proposed) {
	rp := c.remote[m.ID]
	if rp == nil {
		return // answered already (timed out)
	}
	delete(c.remote, m.ID)
	c.sh.Stop(rp.timer)
	switch m.Status {
	case peerwire.ProposedCommitted:
		rp.done(nil)
	case peerwire.ProposedNotPrimary:
		rp.done(service.Errorf(service.ErrMetadataNotReady, "the metadata primary moved: %s; retry shortly", m.Message))
	case peerwire.ProposedRefused:
		rp.done(service.Errorf(service.ErrInvalidRequest, "the metadata primary refused: %s", m.Message))
	default:
		rp.done(&partition.Error{Kind: partition.ErrTimedOut, Message: "the metadata primary failed the proposal: " + m.Message + "; retry"})
	}
}

// proposeFor proposes a peer's command when this node is the metadata
// primary and the op is one it takes from peers, and answers the peer.
// REQUIRES: on shard metaShard.
func (c *controller) proposeFor(from int32, m peerwire.Propose) {
	answer := func(status byte, msg string) {
		if c.d.peers != nil && *c.d.peers != nil {
			(*c.d.peers).AnswerPropose(from, peerwire.Proposed{ID: m.ID, Status: status, Message: msg})
		}
	}
	cmd, err := metadata.DecodeCommand(m.Command)
	if err != nil || !peerProposable[cmd.Op] {
		answer(peerwire.ProposedRefused, "not a command a node may propose through the metadata primary")
		return
	}
	if err := c.admit(true); err != nil {
		answer(peerwire.ProposedNotPrimary, err.Error())
		return
	}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		switch {
		case err == nil:
			answer(peerwire.ProposedCommitted, "")
		case errors.Is(err, service.ErrNotMetadataPrimary):
			answer(peerwire.ProposedNotPrimary, err.Error())
		case errors.Is(err, metadata.ErrUnknownTopic), errors.Is(err, metadata.ErrInvalidCommand):
			answer(peerwire.ProposedRefused, err.Error())
		default:
			answer(peerwire.ProposedFailed, err.Error())
		}
	})
}

// deleteRecords commits partition p of topic (id)'s new log start at
// offset in the metadata, from any node (proposeAnywhere). REQUIRES: on
// shard metaShard.
func (c *controller) deleteRecords(topic string, id metadata.TopicID, p int32, offset int64, done func(error)) {
	cmd, err := c.State().PlanDeleteRecords(topic, id, p, offset)
	if err != nil {
		done(metaKindErr(err))
		return
	}
	c.proposeAnywhere(cmd, adminTimeoutDefault, func(err error) {
		if err != nil {
			err = metaKindErr(c.d.metaErr(err))
		}
		done(err)
	})
}
