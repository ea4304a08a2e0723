package service

import (
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/shard"
)

// Guard returns inner as seen by who: each call first checks that who's
// permissions allow it and answers ErrAuthorization otherwise, so every
// front end (native, HTTP, Kafka) enforces the same rules by calling the
// service through the Guard of the principal it authenticated.
//
// The permissions are read from users at every call, not copied at
// login: a permission revoked, or a user deleted, takes effect on the
// connections and tokens already open. For the anonymous principal (auth
// "none") Guard returns inner itself, at no cost.
func Guard(inner Service, users Users, who security.Principal) Service {
	if who.Superuser && who.User == "" {
		return inner
	}
	return &guarded{Service: inner, users: users, who: who}
}

// GuardUsers is Guard for the user calls: listing and changing users is
// a cluster operation, but a user may always change their own password.
func GuardUsers(inner Users, who security.Principal) Users {
	if who.Superuser && who.User == "" {
		return inner
	}
	return &guardedUsers{Users: inner, g: guarded{users: inner, who: who}}
}

// guarded is a Service whose calls are checked first. Calls it does not
// override (Identity, Brokers, MetadataRoute, ClusterStatus,
// InitProducer) are open to every authenticated principal: they reveal
// no topic and change nothing.
type guarded struct {
	Service
	users Users
	who   security.Principal
}

// check is nil when who may do op on topic now.
func (g *guarded) check(op security.Op, topic string) error {
	u, err := g.users.User(g.who.User)
	if err != nil {
		return err
	}
	if u == nil {
		return Errorf(ErrAuthorization, "user %s no longer exists; log in as another user", g.who.User)
	}
	if u.Superuser || security.Allowed(u.Rules, op, topic) {
		return nil
	}
	if op == security.OpCluster {
		return Errorf(ErrAuthorization, "user %s may not perform cluster operations: no rule allows it (an administrator grants it with `corestream user grant %s cluster`)", u.Name, u.Name)
	}
	return Errorf(ErrAuthorization, "user %s may not %s topic %q: no rule allows it, or one denies it (an administrator grants it with `corestream user grant %s %s --topic %s`)", u.Name, op, topic, u.Name, op, topic)
}

func (g *guarded) Produce(from *shard.Shard, req *ProduceRequest, done func(ProduceResult, error)) {
	if err := g.check(security.OpWrite, req.Topic); err != nil {
		done(ProduceResult{}, err)
		return
	}
	g.Service.Produce(from, req, done)
}

func (g *guarded) Fetch(from *shard.Shard, req *FetchRequest, done func(FetchResult, error)) {
	if err := g.check(security.OpRead, req.Topic); err != nil {
		done(FetchResult{}, err)
		return
	}
	g.Service.Fetch(from, req, done)
}

// OffsetForGeneration is a consumer's truncation check: Describe on the
// topic, as ListOffsets (Kafka asks Describe for OffsetForLeaderEpoch).
func (g *guarded) OffsetForGeneration(from *shard.Shard, req *OffsetForGenerationRequest, done func(OffsetForGenerationResult, error)) {
	if err := g.check(security.OpDescribe, req.Topic); err != nil {
		done(OffsetForGenerationResult{}, err)
		return
	}
	g.Service.OffsetForGeneration(from, req, done)
}

func (g *guarded) ListOffsets(from *shard.Shard, req *ListOffsetsRequest, done func(ListOffsetsResult, error)) {
	if err := g.check(security.OpDescribe, req.Topic); err != nil {
		done(ListOffsetsResult{}, err)
		return
	}
	g.Service.ListOffsets(from, req, done)
}

func (g *guarded) DescribePartition(from *shard.Shard, ref PartitionRef, done func(PartitionDetail, error)) {
	if err := g.check(security.OpDescribe, ref.Topic); err != nil {
		done(PartitionDetail{}, err)
		return
	}
	g.Service.DescribePartition(from, ref, done)
}

// DeleteRecords needs delete on the topic, as Kafka's.
func (g *guarded) DeleteRecords(from *shard.Shard, req *DeleteRecordsRequest, done func(int64, error)) {
	if err := g.check(security.OpDelete, req.Topic); err != nil {
		done(-1, err)
		return
	}
	g.Service.DeleteRecords(from, req, done)
}

// LogDirs lists only the replicas of topics who may describe, as
// ListTopics lists only those topics.
func (g *guarded) LogDirs(from *shard.Shard, done func(LogDirsResult, error)) {
	g.Service.LogDirs(from, func(res LogDirsResult, err error) {
		kept := make([]ReplicaLog, 0, len(res.Replicas)) // a copy: the inner answer may be shared
		for _, r := range res.Replicas {
			if g.check(security.OpDescribe, r.Topic) == nil {
				kept = append(kept, r)
			}
		}
		res.Replicas = kept
		done(res, err)
	})
}

func (g *guarded) Locate(topic string, partition int32) (PartitionRef, int32, error) {
	if err := g.check(security.OpDescribe, topic); err != nil {
		return PartitionRef{}, -1, err
	}
	return g.Service.Locate(topic, partition)
}

// Metadata answers a topic asked for by name that who may not describe
// with that topic's Err (as Kafka does), and leaves such topics out of
// an answer about every topic.
func (g *guarded) Metadata(req MetadataRequest) (MetadataResult, error) {
	res, err := g.Service.Metadata(req)
	if err != nil {
		return res, err
	}
	kept := make([]TopicMetadata, 0, len(res.Topics)) // a copy: the inner answer may be shared
	for _, t := range res.Topics {
		if cerr := g.check(security.OpDescribe, t.Name); cerr != nil {
			if len(req.Topics) == 0 {
				continue
			}
			t = TopicMetadata{Name: t.Name, Err: cerr}
		}
		kept = append(kept, t)
	}
	res.Topics = kept
	return res, nil
}

// ListTopics leaves out the topics who may not describe.
func (g *guarded) ListTopics() ([]TopicSummary, error) {
	all, err := g.Service.ListTopics()
	if err != nil {
		return nil, err
	}
	kept := make([]TopicSummary, 0, len(all))
	for _, t := range all {
		if g.check(security.OpDescribe, t.Name) == nil {
			kept = append(kept, t)
		}
	}
	return kept, nil
}

func (g *guarded) DescribeTopic(name string) (TopicDescription, error) {
	if err := g.check(security.OpDescribe, name); err != nil {
		return TopicDescription{}, err
	}
	return g.Service.DescribeTopic(name)
}

func (g *guarded) CreateTopic(from *shard.Shard, req *CreateTopicRequest, done func(CreateTopicResult, error)) {
	if err := g.check(security.OpCreate, req.Name); err != nil {
		done(CreateTopicResult{}, err)
		return
	}
	g.Service.CreateTopic(from, req, done)
}

func (g *guarded) DeleteTopic(from *shard.Shard, req *DeleteTopicRequest, done func(metadata.TopicID, error)) {
	if err := g.check(security.OpDelete, req.Name); err != nil {
		done(metadata.TopicID{}, err)
		return
	}
	g.Service.DeleteTopic(from, req, done)
}

// AddPartitions needs create on the topic: it creates partitions.
func (g *guarded) AddPartitions(from *shard.Shard, req *AddPartitionsRequest, done func(int32, error)) {
	if err := g.check(security.OpCreate, req.Name); err != nil {
		done(0, err)
		return
	}
	g.Service.AddPartitions(from, req, done)
}

// AlterTopicConfig needs create on the topic, as AddPartitions: it
// changes what the topic is, as its creator chose it.
func (g *guarded) AlterTopicConfig(from *shard.Shard, req *AlterTopicConfigRequest, done func(metadata.TopicConfig, error)) {
	if err := g.check(security.OpCreate, req.Name); err != nil {
		done(metadata.TopicConfig{}, err)
		return
	}
	g.Service.AlterTopicConfig(from, req, done)
}

// CommitOffsets needs read on every topic committed: a consumer commits
// what it read.
func (g *guarded) CommitOffsets(from *shard.Shard, req *CommitOffsetsRequest, done func([]error, error)) {
	for _, o := range req.Offsets {
		if err := g.check(security.OpRead, o.Topic); err != nil {
			done(nil, err)
			return
		}
	}
	g.Service.CommitOffsets(from, req, done)
}

// FetchOffsets needs describe on every topic named, and leaves out the
// others from an answer about every partition.
func (g *guarded) FetchOffsets(from *shard.Shard, req *FetchOffsetsRequest, done func([]CommittedOffset, error)) {
	for _, p := range req.Partitions {
		if err := g.check(security.OpDescribe, p.Topic); err != nil {
			done(nil, err)
			return
		}
	}
	g.Service.FetchOffsets(from, req, func(offs []CommittedOffset, err error) {
		kept := make([]CommittedOffset, 0, len(offs))
		for _, o := range offs {
			if g.check(security.OpDescribe, o.Topic) == nil {
				kept = append(kept, o)
			}
		}
		done(kept, err)
	})
}

func (g *guarded) MovePrimary(from *shard.Shard, req *MovePrimaryRequest, done func(MovePrimaryResult, error)) {
	if err := g.check(security.OpCluster, ""); err != nil {
		done(MovePrimaryResult{}, err)
		return
	}
	g.Service.MovePrimary(from, req, done)
}

func (g *guarded) Rebalance(from *shard.Shard, req *RebalanceRequest, done func(RebalanceResult, error)) {
	if err := g.check(security.OpCluster, ""); err != nil {
		done(RebalanceResult{}, err)
		return
	}
	g.Service.Rebalance(from, req, done)
}

// Reassign moves replicas: a cluster operation, as Rebalance is.
func (g *guarded) Reassign(from *shard.Shard, req *ReassignRequest, done func(ReassignResult, error)) {
	if err := g.check(security.OpCluster, ""); err != nil {
		done(ReassignResult{}, err)
		return
	}
	g.Service.Reassign(from, req, done)
}

// ChangeRoster grows or shrinks the cluster: a cluster operation.
func (g *guarded) ChangeRoster(from *shard.Shard, req *RosterRequest, done func(RosterResult, error)) {
	if err := g.check(security.OpCluster, ""); err != nil {
		done(RosterResult{}, err)
		return
	}
	g.Service.ChangeRoster(from, req, done)
}

type guardedUsers struct {
	Users
	g guarded
}

func (u *guardedUsers) ListUsers() ([]*metadata.User, error) {
	if err := u.g.check(security.OpCluster, ""); err != nil {
		return nil, err
	}
	return u.Users.ListUsers()
}

func (u *guardedUsers) ChangeUser(from *shard.Shard, req *UserChange, done func(*metadata.User, error)) {
	own := req.Op == metadata.OpSetPassword && req.Name == u.g.who.User
	if !own {
		if err := u.g.check(security.OpCluster, ""); err != nil {
			done(nil, err)
			return
		}
	}
	u.Users.ChangeUser(from, req, done)
}

// checkGroup is nil when who may do op on the consumer group named
// group now (Kafka's group resource: read to be a member and commit,
// describe to see it, delete to delete it).
func (g *guarded) checkGroup(op security.Op, group string) error {
	u, err := g.users.User(g.who.User)
	if err != nil {
		return err
	}
	if u == nil {
		return Errorf(ErrGroupAuthorization, "user %s no longer exists; log in as another user", g.who.User)
	}
	if u.Superuser || security.AllowedGroup(u.Rules, op, group) {
		return nil
	}
	return Errorf(ErrGroupAuthorization, "user %s may not %s group %q: no rule allows it, or one denies it (an administrator grants it with `corestream user grant %s %s --group %s`)", u.Name, op, group, u.Name, op, group)
}

// FindCoordinator needs describe on the group, as in Kafka.
func (g *guarded) FindCoordinator(group string) (GroupCoordinator, error) {
	if err := g.checkGroup(security.OpDescribe, group); err != nil {
		return GroupCoordinator{}, err
	}
	return g.Service.FindCoordinator(group)
}

func (g *guarded) JoinGroup(from *shard.Shard, req *JoinGroupRequest, done func(JoinGroupResult, error)) {
	if err := g.checkGroup(security.OpRead, req.Group); err != nil {
		done(JoinGroupResult{Generation: -1, MemberID: req.MemberID}, err)
		return
	}
	g.Service.JoinGroup(from, req, done)
}

func (g *guarded) SyncGroup(from *shard.Shard, req *SyncGroupRequest, done func(SyncGroupResult, error)) {
	if err := g.checkGroup(security.OpRead, req.Group); err != nil {
		done(SyncGroupResult{}, err)
		return
	}
	g.Service.SyncGroup(from, req, done)
}

func (g *guarded) Heartbeat(from *shard.Shard, req *HeartbeatRequest, done func(error)) {
	if err := g.checkGroup(security.OpRead, req.Group); err != nil {
		done(err)
		return
	}
	g.Service.Heartbeat(from, req, done)
}

func (g *guarded) LeaveGroup(from *shard.Shard, req *LeaveGroupRequest, done func([]error, error)) {
	if err := g.checkGroup(security.OpRead, req.Group); err != nil {
		done(nil, err)
		return
	}
	g.Service.LeaveGroup(from, req, done)
}

// CommitGroupOffsets needs read on the group and on every topic
// committed (a consumer commits what it read).
func (g *guarded) CommitGroupOffsets(from *shard.Shard, req *CommitGroupOffsetsRequest, done func([]error, error)) {
	if err := g.checkGroup(security.OpRead, req.Group); err != nil {
		done(nil, err)
		return
	}
	for _, o := range req.Offsets {
		if err := g.check(security.OpRead, o.Topic); err != nil {
			done(nil, err)
			return
		}
	}
	g.Service.CommitGroupOffsets(from, req, done)
}

// FetchGroupOffsets needs describe on the group (read implies it) and
// on every topic named, and leaves the others out of an answer about
// every partition, as FetchOffsets does.
func (g *guarded) FetchGroupOffsets(from *shard.Shard, req *FetchGroupOffsetsRequest, done func([]CommittedOffset, error)) {
	if err := g.checkGroup(security.OpDescribe, req.Group); err != nil {
		done(nil, err)
		return
	}
	for _, p := range req.Partitions {
		if err := g.check(security.OpDescribe, p.Topic); err != nil {
			done(nil, err)
			return
		}
	}
	g.Service.FetchGroupOffsets(from, req, func(offs []CommittedOffset, err error) {
		kept := make([]CommittedOffset, 0, len(offs))
		for _, o := range offs {
			if g.check(security.OpDescribe, o.Topic) == nil {
				kept = append(kept, o)
			}
		}
		done(kept, err)
	})
}

// ListGroups leaves out the groups who may not describe, as Kafka does.
func (g *guarded) ListGroups(from *shard.Shard, req *ListGroupsRequest, done func([]GroupSummary, error)) {
	g.Service.ListGroups(from, req, func(all []GroupSummary, err error) {
		kept := make([]GroupSummary, 0, len(all))
		for _, s := range all {
			if g.checkGroup(security.OpDescribe, s.Name) == nil {
				kept = append(kept, s)
			}
		}
		done(kept, err)
	})
}

func (g *guarded) DescribeGroup(from *shard.Shard, group string, done func(GroupDescription, error)) {
	if err := g.checkGroup(security.OpDescribe, group); err != nil {
		done(GroupDescription{Name: group, State: "Dead"}, err)
		return
	}
	g.Service.DescribeGroup(from, group, done)
}

func (g *guarded) DeleteGroup(from *shard.Shard, group string, done func(error)) {
	if err := g.checkGroup(security.OpDelete, group); err != nil {
		done(err)
		return
	}
	g.Service.DeleteGroup(from, group, done)
}

// DeleteGroupOffsets needs delete on the group and read on every topic
// named, as Kafka's OffsetDelete.
func (g *guarded) DeleteGroupOffsets(from *shard.Shard, req *DeleteGroupOffsetsRequest, done func([]error, error)) {
	if err := g.checkGroup(security.OpDelete, req.Group); err != nil {
		done(nil, err)
		return
	}
	for _, p := range req.Partitions {
		if err := g.check(security.OpRead, p.Topic); err != nil {
			done(nil, err)
			return
		}
	}
	g.Service.DeleteGroupOffsets(from, req, done)
}

// AddPartitionsToTxn needs write on every topic added (the transaction
// writes there).
func (g *guarded) AddPartitionsToTxn(from *shard.Shard, req *AddPartitionsToTxnRequest, done func([]error, error)) {
	for _, p := range req.Partitions {
		if err := g.check(security.OpWrite, p.Topic); err != nil {
			done(nil, err)
			return
		}
	}
	g.Service.AddPartitionsToTxn(from, req, done)
}

// TxnOffsetCommit needs what CommitGroupOffsets needs: read on the
// group and on every topic committed.
func (g *guarded) TxnOffsetCommit(from *shard.Shard, req *TxnOffsetCommitRequest, done func([]error, error)) {
	if err := g.checkGroup(security.OpRead, req.Group); err != nil {
		done(nil, err)
		return
	}
	for _, o := range req.Offsets {
		if err := g.check(security.OpRead, o.Topic); err != nil {
			done(nil, err)
			return
		}
	}
	g.Service.TxnOffsetCommit(from, req, done)
}

// AddOffsetsToTxn needs read on the group, as its offset commit does.
func (g *guarded) AddOffsetsToTxn(from *shard.Shard, req *AddOffsetsToTxnRequest, done func(error)) {
	if err := g.checkGroup(security.OpRead, req.Group); err != nil {
		done(err)
		return
	}
	g.Service.AddOffsetsToTxn(from, req, done)
}

// DescribeTransactions is a cluster operation: it shows the partitions
// of any producer's transaction.
func (g *guarded) DescribeTransactions(from *shard.Shard, ids []string, done func([]TxnDescription)) {
	if err := g.check(security.OpCluster, ""); err != nil {
		out := make([]TxnDescription, len(ids))
		for i, id := range ids {
			out[i] = TxnDescription{TransactionalID: id, Err: err}
		}
		done(out)
		return
	}
	g.Service.DescribeTransactions(from, ids, done)
}

// ListTransactions is a cluster operation.
func (g *guarded) ListTransactions(from *shard.Shard, req *ListTransactionsRequest, done func([]TxnSummary, error)) {
	if err := g.check(security.OpCluster, ""); err != nil {
		done(nil, err)
		return
	}
	g.Service.ListTransactions(from, req, done)
}
