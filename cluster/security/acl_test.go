package security

import "testing"

func TestAllowed(t *testing.T) {
	allowOrders := Rule{Allow: true, Op: OpWrite, Topic: "orders"}
	allowAuditRead := Rule{Allow: true, Op: OpRead, Topic: "audit.", Prefix: true}
	denyAuditSecret := Rule{Op: OpRead, Topic: "audit.secret"}
	allowAll := Rule{Allow: true, Op: OpRead, Prefix: true}
	denyWrite := Rule{Op: OpWrite, Prefix: true}
	cluster := Rule{Allow: true, Op: OpCluster}
	for _, tc := range []struct {
		name  string
		rules []Rule
		op    Op
		topic string
		want  bool
	}{
		{"no rules deny", nil, OpRead, "orders", false},
		{"exact allow", []Rule{allowOrders}, OpWrite, "orders", true},
		{"exact is not prefix", []Rule{allowOrders}, OpWrite, "orders2", false},
		{"other op", []Rule{allowOrders}, OpDelete, "orders", false},
		{"write implies describe", []Rule{allowOrders}, OpDescribe, "orders", true},
		{"read implies describe", []Rule{allowAuditRead}, OpDescribe, "audit.x", true},
		{"prefix allow", []Rule{allowAuditRead}, OpRead, "audit.log", true},
		{"prefix miss", []Rule{allowAuditRead}, OpRead, "auditlog", false},
		{"deny wins over prefix allow", []Rule{allowAuditRead, denyAuditSecret}, OpRead, "audit.secret", false},
		{"deny wins whatever the order", []Rule{denyAuditSecret, allowAuditRead}, OpRead, "audit.secret", false},
		{"empty prefix is every topic", []Rule{allowAll}, OpRead, "anything", true},
		{"deny every write", []Rule{allowOrders, denyWrite}, OpWrite, "orders", false},
		{"denied write still describes", []Rule{allowAll, denyWrite}, OpDescribe, "orders", true},
		{"cluster", []Rule{cluster}, OpCluster, "", true},
		{"topic rules give no cluster", []Rule{allowAll}, OpCluster, "", false},
	} {
		if got := Allowed(tc.rules, tc.op, tc.topic); got != tc.want {
			t.Errorf("%s: Allowed(%v, %s, %q) = %v, want %v", tc.name, tc.rules, tc.op, tc.topic, got, tc.want)
		}
	}
}

func TestRuleValidate(t *testing.T) {
	for _, tc := range []struct {
		r  Rule
		ok bool
	}{
		{Rule{Op: OpRead, Topic: "a"}, true},
		{Rule{Op: OpRead, Prefix: true}, true},
		{Rule{Op: OpRead}, false},
		{Rule{Op: "alter", Topic: "a"}, false},
		{Rule{Op: OpCluster}, true},
		{Rule{Op: OpCluster, Topic: "a"}, false},
		{Rule{Op: OpRead, Topic: "g", Group: true}, true},
		{Rule{Op: OpDelete, Prefix: true, Group: true}, true},
		{Rule{Op: OpWrite, Topic: "g", Group: true}, false},
		{Rule{Op: OpCluster, Group: true}, false},
	} {
		if err := tc.r.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v, want ok %v", tc.r, err, tc.ok)
		}
	}
}

// Group rules speak of groups only, topic rules of topics only, with the
// same prefix, deny and implied-describe rules.
func TestAllowedGroup(t *testing.T) {
	readApp := Rule{Allow: true, Op: OpRead, Topic: "app.", Prefix: true, Group: true}
	denyBanned := Rule{Op: OpRead, Topic: "app.banned", Group: true}
	topicRead := Rule{Allow: true, Op: OpRead, Prefix: true}
	for _, tc := range []struct {
		name  string
		rules []Rule
		op    Op
		group string
		want  bool
	}{
		{"prefix allow", []Rule{readApp}, OpRead, "app.billing", true},
		{"read implies describe", []Rule{readApp}, OpDescribe, "app.billing", true},
		{"read gives no delete", []Rule{readApp}, OpDelete, "app.billing", false},
		{"deny wins", []Rule{readApp, denyBanned}, OpRead, "app.banned", false},
		{"a topic rule is no group rule", []Rule{topicRead}, OpRead, "app.billing", false},
	} {
		if got := AllowedGroup(tc.rules, tc.op, tc.group); got != tc.want {
			t.Errorf("%s: AllowedGroup = %v, want %v", tc.name, got, tc.want)
		}
	}
	if Allowed([]Rule{readApp}, OpRead, "app.billing") {
		t.Error("a group rule allowed a topic of the same name")
	}
}
