package node

import (
	"reflect"
	"testing"

	ctl "github.com/corestream/corestream/cluster/controller"
	"github.com/corestream/corestream/cluster/node/groupshost"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/transport"
)

// No part holds a pointer to the Node (design/node-parts.md): each reaches
// the rest of the node through its deps struct only, so a part can be
// built and driven without a whole node. Struct fields are followed by
// value, through pointers, slices, arrays and maps; a function field's
// closure is not visible to this check.
func TestPartsHoldNoNode(t *testing.T) {
	node := reflect.TypeOf(Node{})
	for _, part := range []any{controller{}, ctl.Balancer{}, ctl.Reassigner{}, ctl.RosterDriver{}, ctl.Admin{}, reconciler{}, transport.TCP{}, metaPort{}, transport.Liveness{}, transport.DownWatch{}, routes.Router{}, replicaHost{}, nodesvc.Service{}, ctrlAdmin{}, groupshost.Host{}, groupshost.Scans{}} {
		seen := map[reflect.Type]bool{}
		var walk func(typ reflect.Type, path string)
		walk = func(typ reflect.Type, path string) {
			if typ == node {
				t.Errorf("%s holds the Node", path)
				return
			}
			if seen[typ] {
				return
			}
			seen[typ] = true
			switch typ.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Array:
				walk(typ.Elem(), path)
			case reflect.Map:
				walk(typ.Key(), path)
				walk(typ.Elem(), path)
			case reflect.Struct:
				for i := range typ.NumField() {
					f := typ.Field(i)
					walk(f.Type, path+"."+f.Name)
				}
			}
		}
		typ := reflect.TypeOf(part)
		walk(typ, typ.Name())
	}
}
