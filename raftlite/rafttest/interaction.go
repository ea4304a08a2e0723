package rafttest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/corestream/corestream/raftlite"
)

// InteractionEnv drives a few Nodes of one group by hand, one command at a
// time, and prints what happens (Readys handled, messages delivered). The
// golden scripts in raftlite/testdata are written in its commands; see
// Handle for the list.
type InteractionEnv struct {
	nodes   []*envNode // index id-1
	limits  *raftlite.Limits
	group   raftlite.GroupID
	members raftlite.ReplicaSet
	// msgs are in flight, in the order they were sent.
	msgs []raftlite.Message
	// blocked holds cut links (both directions are listed).
	blocked map[[2]raftlite.NodeID]bool
}

type envNode struct {
	id   raftlite.NodeID
	node *raftlite.Node // nil while crashed
	disk *Disk
	// async: durability is reported only by the "durable" command, not
	// right after each Ready.
	async     bool
	preferred bool
	// initConf is the configuration the node was created with.
	initConf raftlite.Membership
}

// NewInteractionEnv returns an empty environment.
func NewInteractionEnv() *InteractionEnv {
	return &InteractionEnv{group: 1, blocked: map[[2]raftlite.NodeID]bool{}}
}

// Handle runs one command and returns its output. Commands:
//
//	add-nodes N [election= heartbeat= transfer-ticks= inflight-bytes=
//	            inflight-msgs= append-bytes= uncommitted-bytes= quiesce=true
//	            preferred=ID async=ID,ID start=OFFSET]
//	campaign ID | tick ID|all [n=N] | tick-election ID | tick-heartbeat ID
//	propose ID DATA [count=N] | transfer-leadership from=ID to=ID
//	process-ready ID...|all | deliver-msgs [ID...] [drop=true] [type=MsgType]
//	stabilize | run n=TICKS | partition A,B C,D | isolate ID | heal
//	durable ID | compact ID START [snapshot=true] | crash ID [lose-from=OFFSET] | restart ID | unquiesce ID
//	forget-leader ID
//	propose-conf-change ID add-learner|promote|remove NODE
//	status [ID...] | log [ID...]
//
// propose-conf-change with add-learner creates NODE (an empty log, the new
// configuration as its creation configuration) when it does not exist.
func (e *InteractionEnv) Handle(c *Cmd) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("panic: %v", r)
		}
	}()
	var b strings.Builder
	switch c.Name {
	case "add-nodes":
		e.addNodes(c, &b)
	case "campaign":
		e.live(c.ArgInt(0)).Campaign()
	case "tick":
		for _, n := range e.targets(c) {
			for i := 0; i < c.Int("n", 1); i++ {
				n.node.Tick()
			}
		}
	case "tick-election":
		e.tickElection(e.live(c.ArgInt(0)))
	case "tick-heartbeat":
		n := e.live(c.ArgInt(0))
		for i := int32(0); i < e.limits.HeartbeatTicks; i++ {
			n.Tick()
		}
	case "propose":
		e.propose(c, &b)
	case "transfer-leadership":
		err := e.live(c.Int("from", 0)).TransferLeadership(raftlite.NodeID(c.Int("to", 0)))
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
	case "process-ready":
		for _, n := range e.targets(c) {
			e.processReady(n, &b)
		}
	case "deliver-msgs":
		e.deliver(c, &b)
	case "stabilize":
		e.stabilize(&b)
	case "run":
		e.run(c.Int("n", 1), &b)
	case "partition":
		e.partition(c)
	case "isolate":
		id := raftlite.NodeID(c.ArgInt(0))
		for _, n := range e.nodes {
			if n.id != id {
				e.blocked[[2]raftlite.NodeID{id, n.id}] = true
				e.blocked[[2]raftlite.NodeID{n.id, id}] = true
			}
		}
	case "heal":
		e.blocked = map[[2]raftlite.NodeID]bool{}
	case "durable":
		n := e.nodes[c.ArgInt(0)-1]
		if last, term, ok := n.disk.Sync(); ok {
			n.node.Durable(last, term)
		}
	case "compact":
		n := e.nodes[c.ArgInt(0)-1]
		start := int64(c.ArgInt(1))
		if err := n.disk.Compact(start); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		} else if c.Str("snapshot", "") == "true" {
			n.disk.Snapshot = []byte(fmt.Sprintf("state@%d", start-1))
		}
	case "crash":
		n := e.nodes[c.ArgInt(0)-1]
		n.node = nil
		n.disk.Crash(nil)
		if from := c.Int("lose-from", -1); from >= 0 {
			// A log that acknowledges before it syncs (fsync other
			// than always) loses acknowledged entries on a power loss.
			for _, l := range []*raftlite.MemLog{n.disk.Log, n.disk.Synced} {
				if _, err := l.TruncateTo(int64(from)); err != nil {
					fmt.Fprintf(&b, "error: %v\n", err)
				}
			}
		}
	case "restart":
		e.restart(e.nodes[c.ArgInt(0)-1])
	case "unquiesce":
		e.live(c.ArgInt(0)).Unquiesce()
	case "forget-leader":
		e.live(c.ArgInt(0)).ForgetLeader()
	case "propose-conf-change":
		e.proposeConfChange(c, &b)
	case "status":
		for _, n := range e.targets(c) {
			e.status(n, &b)
		}
	case "log":
		for _, n := range e.targets(c) {
			fmt.Fprintf(&b, "%d: %s\n", n.id, formatLog(n.disk.Log))
		}
	default:
		return fmt.Sprintf("unknown command %q", c.Name)
	}
	return b.String()
}

func (e *InteractionEnv) live(id int) *raftlite.Node {
	if id < 1 || id > len(e.nodes) || e.nodes[id-1].node == nil {
		panic(fmt.Sprintf("node %d is not running", id))
	}
	return e.nodes[id-1].node
}

// targets returns the nodes named by the positional arguments ("all" or
// none means every running node).
func (e *InteractionEnv) targets(c *Cmd) []*envNode {
	var out []*envNode
	if len(c.Args) == 0 || c.Args[0] == "all" {
		for _, n := range e.nodes {
			if n.node != nil {
				out = append(out, n)
			}
		}
		return out
	}
	for i := range c.Args {
		e.live(c.ArgInt(i))
		out = append(out, e.nodes[c.ArgInt(i)-1])
	}
	return out
}

func (e *InteractionEnv) addNodes(c *Cmd, b *strings.Builder) {
	count := c.ArgInt(0)
	e.limits = &raftlite.Limits{
		ElectionTicks:       int32(c.Int("election", 10)),
		HeartbeatTicks:      int32(c.Int("heartbeat", 1)),
		TransferTicksMax:    int32(c.Int("transfer-ticks", 0)),
		InflightBytesMax:    int64(c.Int("inflight-bytes", 0)),
		InflightMsgsMax:     int32(c.Int("inflight-msgs", 0)),
		AppendBytesMax:      int64(c.Int("append-bytes", 0)),
		UncommittedBytesMax: int64(c.Int("uncommitted-bytes", 0)),
		NoopBytes:           10,
		Quiesce:             c.Str("quiesce", "") == "true",
	}
	async := map[int]bool{}
	for _, s := range strings.Split(c.Str("async", ""), ",") {
		if id, err := strconv.Atoi(s); err == nil {
			async[id] = true
		}
	}
	for i := 1; i <= count; i++ {
		e.members = e.members.Add(raftlite.NodeID(i))
	}
	for i := 1; i <= count; i++ {
		n := &envNode{
			id:        raftlite.NodeID(i),
			disk:      NewDisk(int64(c.Int("start", 0))),
			async:     async[i],
			preferred: c.Int("preferred", 0) == i,
			initConf:  raftlite.Membership{Voters: e.members},
		}
		e.nodes = append(e.nodes, n)
		e.restart(n)
	}
	fmt.Fprintf(b, "added %d nodes %v\n", count, e.members)
}

func (e *InteractionEnv) restart(n *envNode) {
	node, err := raftlite.New(raftlite.Config{
		ID: n.id, Group: e.group, Replicas: n.initConf.Voters, Learners: n.initConf.Learners, Log: n.disk.Log,
		HardState: n.disk.HS, Seed: uint64(n.id), Preferred: n.preferred, Limits: e.limits,
	})
	if err != nil {
		panic(err)
	}
	n.node = node
}

// tickElection ticks a follower until it campaigns (at most twice the
// election timeout), or a leader for one election timeout.
func (e *InteractionEnv) tickElection(n *raftlite.Node) {
	if n.Role() == raftlite.RoleLeader {
		for i := int32(0); i < e.limits.ElectionTicks; i++ {
			n.Tick()
		}
		return
	}
	for i := int32(0); i < 2*e.limits.ElectionTicks && n.Role() == raftlite.RoleFollower; i++ {
		n.Tick()
	}
}

func (e *InteractionEnv) propose(c *Cmd, b *strings.Builder) {
	ent, err := e.live(c.ArgInt(0)).Propose(int32(c.Int("count", 1)), []byte(c.Args[1]))
	if err != nil {
		fmt.Fprintf(b, "error: %v\n", err)
		return
	}
	fmt.Fprintf(b, "entry %v\n", ent)
}

var confChangeTypes = map[string]raftlite.ConfChangeType{
	"add-learner": raftlite.ConfAddLearner, "promote": raftlite.ConfPromote, "remove": raftlite.ConfRemove,
}

// proposeConfChange runs "propose-conf-change ID TYPE NODE".
func (e *InteractionEnv) proposeConfChange(c *Cmd, b *strings.Builder) {
	cc := raftlite.ConfChange{Type: confChangeTypes[c.Args[1]], Node: raftlite.NodeID(c.ArgInt(2))}
	ent, err := e.live(c.ArgInt(0)).ProposeConfChange(cc)
	if err != nil {
		fmt.Fprintf(b, "error: %v\n", err)
		return
	}
	fmt.Fprintf(b, "entry %v\n", ent)
	if cc.Type != raftlite.ConfAddLearner || int(cc.Node) <= len(e.nodes) {
		return
	}
	if int(cc.Node) != len(e.nodes)+1 {
		panic(fmt.Sprintf("add nodes in order: next is %d", len(e.nodes)+1))
	}
	n := &envNode{id: cc.Node, disk: NewDisk(0), initConf: ent.Conf}
	e.nodes = append(e.nodes, n)
	e.restart(n)
	fmt.Fprintf(b, "started node %d with %v\n", n.id, ent.Conf)
}

// processReady handles n's Ready, printing it.
func (e *InteractionEnv) processReady(n *envNode, b *strings.Builder) {
	if !n.node.HasReady() {
		return
	}
	rd := n.node.Ready()
	fmt.Fprintf(b, "> %d handling Ready\n", n.id)
	if rd.SoftStateChanged {
		fmt.Fprintf(b, "  Lead:%d Role:%v\n", rd.Lead, rd.Role)
	}
	if rd.HardStateChanged {
		fmt.Fprintf(b, "  HardState Term:%d Vote:%d\n", rd.HardState.Term, rd.HardState.Vote)
	}
	if rd.ConfChanged {
		fmt.Fprintf(b, "  Conf: %v\n", rd.Conf)
	}
	if r := rd.Reset; r != nil {
		fmt.Fprintf(b, "  Reset Start:%d PrevTerm:%d Snapshot:%q\n", r.Start, r.PrevTerm, r.Snapshot)
	}
	if len(rd.Entries) > 0 {
		fmt.Fprintf(b, "  Entries: %s\n", formatEntries(rd.Entries))
	}
	if rd.CommitChanged {
		fmt.Fprintf(b, "  Commit:%d\n", rd.Commit)
	}
	if _, err := n.disk.Apply(&rd); err != nil {
		fmt.Fprintf(b, "  error: %v\n", err)
	}
	for _, m := range rd.Messages {
		fmt.Fprintf(b, "  %v\n", m)
		if m.Type == raftlite.MsgReset && n.disk.Snapshot != nil {
			m.Snapshot = n.disk.Snapshot
		}
		e.msgs = append(e.msgs, m)
	}
	n.node.Advance(rd)
	if !n.async && len(rd.Entries) > 0 {
		if last, term, ok := n.disk.Sync(); ok {
			n.node.Durable(last, term)
		}
	}
}

// deliver steps the in-flight messages addressed to the named nodes (all
// when none are named), or drops them with drop=true.
func (e *InteractionEnv) deliver(c *Cmd, b *strings.Builder) {
	to := map[raftlite.NodeID]bool{}
	for i := range c.Args {
		to[raftlite.NodeID(c.ArgInt(i))] = true
	}
	typ := c.Str("type", "")
	drop := c.Str("drop", "") == "true"
	var keep []raftlite.Message
	var byNode = map[raftlite.NodeID][]raftlite.Message{}
	var order []raftlite.NodeID
	for _, m := range e.msgs {
		if (len(to) > 0 && !to[m.To]) || (typ != "" && m.Type.String() != typ) {
			keep = append(keep, m)
			continue
		}
		if _, ok := byNode[m.To]; !ok {
			order = append(order, m.To)
		}
		byNode[m.To] = append(byNode[m.To], m)
	}
	e.msgs = keep
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	for _, id := range order {
		fmt.Fprintf(b, "> %d receiving messages\n", id)
		lost := 0
		for _, m := range byNode[id] {
			var n *envNode
			if int(id) <= len(e.nodes) {
				n = e.nodes[id-1]
			}
			switch {
			case drop:
				fmt.Fprintf(b, "  %v dropped\n", m)
			case n == nil || n.node == nil || e.blocked[[2]raftlite.NodeID{m.From, m.To}]:
				lost++
			default:
				fmt.Fprintf(b, "  %v\n", m)
				if err := n.node.Step(m); err != nil {
					fmt.Fprintf(b, "  error: %v\n", err)
				}
			}
		}
		if lost > 0 {
			fmt.Fprintf(b, "  (%d lost: node down or link cut)\n", lost)
		}
	}
}

// stabilize handles Readys and delivers messages until nothing is left.
func (e *InteractionEnv) stabilize(b *strings.Builder) {
	for round := 0; round < 1000; round++ {
		busy := false
		for _, n := range e.nodes {
			if n.node != nil && n.node.HasReady() {
				busy = true
				e.processReady(n, b)
			}
		}
		if len(e.msgs) > 0 {
			busy = true
			e.deliver(&Cmd{KV: map[string]string{}}, b)
		}
		if !busy {
			return
		}
	}
	b.WriteString("did not stabilize in 1000 rounds\n")
}

// run ticks every running node and stabilizes, n times, printing only the
// changes of role, term, leader and commit.
func (e *InteractionEnv) run(n int, b *strings.Builder) {
	type view struct {
		role   raftlite.Role
		term   int32
		lead   raftlite.NodeID
		commit int64
	}
	look := func(nd *envNode) view {
		if nd.node == nil {
			return view{}
		}
		return view{nd.node.Role(), nd.node.Term(), nd.node.Leader(), nd.node.Commit()}
	}
	before := make([]view, len(e.nodes))
	for i, nd := range e.nodes {
		before[i] = look(nd)
	}
	var discard strings.Builder
	for t := 1; t <= n; t++ {
		for _, nd := range e.nodes {
			if nd.node != nil {
				nd.node.Tick()
			}
		}
		e.stabilize(&discard)
		for i, nd := range e.nodes {
			if v := look(nd); v != before[i] && nd.node != nil {
				fmt.Fprintf(b, "tick %d: %d is %v term=%d lead=%d commit=%d\n", t, nd.id, v.role, v.term, v.lead, v.commit)
				before[i] = v
			}
		}
	}
}

func (e *InteractionEnv) partition(c *Cmd) {
	side := map[raftlite.NodeID]int{}
	for i, g := range c.Args {
		for _, s := range strings.Split(g, ",") {
			id, _ := strconv.Atoi(s)
			side[raftlite.NodeID(id)] = i
		}
	}
	for _, a := range e.nodes {
		for _, b := range e.nodes {
			if side[a.id] != side[b.id] {
				e.blocked[[2]raftlite.NodeID{a.id, b.id}] = true
			}
		}
	}
}

func (e *InteractionEnv) status(n *envNode, b *strings.Builder) {
	s := n.node.Status()
	fmt.Fprintf(b, "%d: %v term=%d vote=%d lead=%d commit=%d last=%d durable=%d start=%d",
		s.ID, s.Role, s.Term, s.Vote, s.Lead, s.Commit, s.LastOffset, s.Durable, s.LogStart)
	if s.Transferee != raftlite.None {
		fmt.Fprintf(b, " transferee=%d", s.Transferee)
	}
	if s.Quiesced {
		b.WriteString(" quiesced")
	}
	if s.ConfIndex >= 0 || s.Conf.Learners != 0 {
		fmt.Fprintf(b, " conf=%v@%d", s.Conf, s.ConfIndex)
	}
	b.WriteByte('\n')
	for _, p := range s.Progress {
		active := ""
		if p.Active {
			active = " active"
		}
		if p.Learner {
			active += " learner"
		}
		fmt.Fprintf(b, "  %d: match=%d next=%d %v%s inflight=%dB\n", p.ID, p.Match, p.Next, p.State, active, p.InflightBytes)
	}
}

func formatEntries(ents []raftlite.Entry) string {
	s := make([]string, len(ents))
	for i, e := range ents {
		s[i] = e.String()
	}
	return strings.Join(s, " ")
}

func formatLog(l *raftlite.MemLog) string {
	return fmt.Sprintf("start=%d prev=%d [%s]", l.StartOffset(), l.PrevTerm(), formatEntries(l.All()))
}
