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
	} {
		if err := tc.r.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v, want ok %v", tc.r, err, tc.ok)
		}
	}
}
