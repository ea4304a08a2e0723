package vfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Op names a file-system operation, for error injection.
type Op uint8

// Operations an Injector sees.
const (
	OpCreate Op = iota + 1
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpPreallocate
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpStat
	OpSyncDir
	OpSyncFS
)

var opNames = [...]string{"?", "create", "open", "read", "write", "sync", "truncate",
	"preallocate", "remove", "rename", "mkdir", "list", "stat", "syncdir", "syncfs"}

// String names the operation.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// Injector decides whether an operation on path fails: it returns nil to let
// the operation proceed, or the error the operation returns instead (for a
// write: before writing anything). It runs with the MemFS lock held and must
// not call back into the MemFS.
type Injector func(op Op, path string) error

// MemFS is an in-memory file system for tests. It keeps, for every file, the
// contents that a Sync made durable and the operations since; for every
// directory, the entries that a SyncDir made durable and the namespace
// operations since. Crash throws away what a power loss could throw away,
// chosen by a seed. It injects errors through an Injector and runs out of
// space at a capacity.
//
// All methods are safe for concurrent use (one mutex guards the whole file
// system; it is a test double, not a fast path).
type MemFS struct {
	mu sync.Mutex
	// Everything below is guarded by mu.

	// gen counts crashes; a handle opened in an older generation is dead.
	gen  uint64
	dirs map[string]bool
	// files is the current namespace: path → node.
	files map[string]*memNode
	// durable is the namespace as of the last SyncDir of each directory.
	durable map[string]*memNode
	// nsLog holds the namespace operations not yet made durable, in order.
	nsLog []nsOp
	// capacityBytes bounds the sum of file footprints (-1: unbounded).
	capacityBytes int64
	inject        Injector
}

type nsKind uint8

const (
	nsCreate nsKind = iota
	nsRemove
	nsRename
)

// nsOp is a namespace change in one directory (renames never cross
// directories in a MemFS).
type nsOp struct {
	kind     nsKind
	dir      string
	name, to string
	node     *memNode
}

// memNode is one file's contents.
// Invariant: applying pending to a copy of synced yields data.
type memNode struct {
	data    []byte
	synced  []byte
	pending []contentOp
	// reservedBytes is the end of space reserved by Preallocate.
	reservedBytes int64
}

type contentOp struct {
	truncate bool
	off      int64
	b        []byte // write: the bytes; truncate: unused
	size     int64  // truncate: the new size
}

func (n *memNode) footprint() int64 { return max(int64(len(n.data)), n.reservedBytes) }

// NewMem returns an empty MemFS with unbounded capacity.
func NewMem() *MemFS {
	return &MemFS{
		dirs:          map[string]bool{"/": true, ".": true},
		files:         map[string]*memNode{},
		durable:       map[string]*memNode{},
		capacityBytes: -1,
	}
}

// SetInjector installs fn (nil removes it).
func (m *MemFS) SetInjector(fn Injector) {
	m.mu.Lock()
	m.inject = fn
	m.mu.Unlock()
}

// SetCapacity bounds the bytes all files may occupy (their size, or their
// preallocated end when larger); -1 removes the bound. A write that does not
// fit writes what fits and fails with ENOSPC.
func (m *MemFS) SetCapacity(bytes int64) {
	m.mu.Lock()
	m.capacityBytes = bytes
	m.mu.Unlock()
}

// UsedBytes is the space the files occupy now.
func (m *MemFS) UsedBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usedLocked()
}

func (m *MemFS) usedLocked() int64 {
	var u int64
	seen := map[*memNode]bool{}
	for _, n := range m.files {
		if !seen[n] {
			seen[n] = true
			u += n.footprint()
		}
	}
	return u
}

func (m *MemFS) check(op Op, name string) error {
	if m.inject == nil {
		return nil
	}
	if err := m.inject(op, name); err != nil {
		return &os.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

func clean(name string) string { return path.Clean(name) }

func (m *MemFS) dirExists(dir string) bool { return m.dirs[dir] }

func notExist(op, name string) error {
	return &os.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

// Create creates or truncates name.
func (m *MemFS) Create(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpCreate, name); err != nil {
		return nil, err
	}
	dir := path.Dir(name)
	if !m.dirExists(dir) {
		return nil, notExist("create", name)
	}
	if n, ok := m.files[name]; ok {
		// Truncation of an existing file is a content operation.
		n.pending = append(n.pending, contentOp{truncate: true, size: 0})
		n.data = n.data[:0]
		n.reservedBytes = 0
		return m.handle(name, n, true), nil
	}
	n := &memNode{}
	m.files[name] = n
	m.nsLog = append(m.nsLog, nsOp{kind: nsCreate, dir: dir, name: path.Base(name), node: n})
	return m.handle(name, n, true), nil
}

// OpenReadWrite opens an existing file for reading and writing.
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open(name, true) }

// Open opens an existing file read-only.
func (m *MemFS) Open(name string) (File, error) { return m.open(name, false) }

func (m *MemFS) open(name string, rw bool) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpOpen, name); err != nil {
		return nil, err
	}
	n, ok := m.files[name]
	if !ok {
		return nil, notExist("open", name)
	}
	return m.handle(name, n, rw), nil
}

func (m *MemFS) handle(name string, n *memNode, rw bool) *memFile {
	return &memFile{fs: m, node: n, name: name, gen: m.gen, rw: rw}
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		m.nsLog = append(m.nsLog, nsOp{kind: nsRemove, dir: path.Dir(name), name: path.Base(name)})
		return nil
	}
	if m.dirs[name] {
		prefix := name + "/"
		for p := range m.files {
			if strings.HasPrefix(p, prefix) {
				return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
			}
		}
		delete(m.dirs, name)
		return nil
	}
	return notExist("remove", name)
}

// Rename atomically replaces newname with oldname. Both must be in the same
// directory (the log never renames across directories).
func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRename, oldname); err != nil {
		return err
	}
	n, ok := m.files[oldname]
	if !ok {
		return notExist("rename", oldname)
	}
	dir := path.Dir(oldname)
	if path.Dir(newname) != dir {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EXDEV}
	}
	delete(m.files, oldname)
	m.files[newname] = n
	m.nsLog = append(m.nsLog, nsOp{kind: nsRename, dir: dir, name: path.Base(oldname), to: path.Base(newname)})
	return nil
}

// MkdirAll creates dir and its parents; directory creation is durable at
// once (the log creates its directory before anything else).
func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpMkdir, dir); err != nil {
		return err
	}
	for d := dir; ; d = path.Dir(d) {
		m.dirs[d] = true
		if d == "/" || d == "." {
			break
		}
	}
	return nil
}

// List returns the sorted names of dir's entries (files and directories).
func (m *MemFS) List(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpList, dir); err != nil {
		return nil, err
	}
	if !m.dirExists(dir) {
		return nil, notExist("open", dir)
	}
	var names []string
	for p := range m.files {
		if path.Dir(p) == dir {
			names = append(names, path.Base(p))
		}
	}
	for d := range m.dirs {
		if d != dir && path.Dir(d) == dir {
			names = append(names, path.Base(d))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpStat, name); err != nil {
		return nil, err
	}
	if n, ok := m.files[name]; ok {
		return memInfo{name: path.Base(name), size: int64(len(n.data))}, nil
	}
	if m.dirs[name] {
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	return nil, notExist("stat", name)
}

// SyncDir makes the namespace operations in dir durable.
func (m *MemFS) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpSyncDir, dir); err != nil {
		return err
	}
	if !m.dirExists(dir) {
		return notExist("syncdir", dir)
	}
	rest := m.nsLog[:0]
	for _, op := range m.nsLog {
		if op.dir == dir {
			applyNs(m.durable, op)
		} else {
			rest = append(rest, op)
		}
	}
	clear(m.nsLog[len(rest):])
	m.nsLog = rest
	return nil
}

// SyncFS makes every namespace operation and every file's contents
// durable (a MemFS is one file system). The injector sees one OpSyncFS per
// directory named; a failure leaves nothing more durable than before.
func (m *MemFS) SyncFS(dirs ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range dirs {
		d = clean(d)
		if err := m.check(OpSyncFS, d); err != nil {
			return err
		}
		if !m.dirExists(d) {
			return notExist("syncfs", d)
		}
	}
	for _, op := range m.nsLog {
		applyNs(m.durable, op)
	}
	clear(m.nsLog)
	m.nsLog = m.nsLog[:0]
	for _, n := range m.files {
		n.synced = bytes.Clone(n.data)
		n.pending = nil
	}
	return nil
}

func applyNs(ns map[string]*memNode, op nsOp) {
	p := path.Join(op.dir, op.name)
	switch op.kind {
	case nsCreate:
		ns[p] = op.node
	case nsRemove:
		delete(ns, p)
	case nsRename:
		if n, ok := ns[p]; ok {
			delete(ns, p)
			ns[path.Join(op.dir, op.to)] = n
		}
	}
}

// Crash simulates a power loss, chosen by seed: every directory keeps its
// durable entries plus a random prefix of the namespace operations since its
// last SyncDir; every file keeps its synced contents plus a random prefix of
// the writes and truncations since its last Sync, the first dropped write
// torn at a random byte. Handles opened before the crash fail with
// ErrCrashed afterwards. The injector is removed.
func (m *MemFS) Crash(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inject = nil

	// Namespace: a random prefix of each directory's pending operations.
	byDir := map[string][]nsOp{}
	var dirOrder []string
	for _, op := range m.nsLog {
		if _, ok := byDir[op.dir]; !ok {
			dirOrder = append(dirOrder, op.dir)
		}
		byDir[op.dir] = append(byDir[op.dir], op)
	}
	sort.Strings(dirOrder)
	for _, d := range dirOrder {
		ops := byDir[d]
		k := rng.IntN(len(ops) + 1)
		for _, op := range ops[:k] {
			applyNs(m.durable, op)
		}
	}
	m.nsLog = nil
	m.files = make(map[string]*memNode, len(m.durable))
	names := make([]string, 0, len(m.durable))
	for p, n := range m.durable {
		m.files[p] = n
		names = append(names, p)
	}
	sort.Strings(names)

	// Contents: synced plus a random prefix of what followed.
	done := map[*memNode]bool{}
	for _, p := range names {
		n := m.files[p]
		if done[n] {
			continue
		}
		done[n] = true
		data := bytes.Clone(n.synced)
		k := rng.IntN(len(n.pending) + 1)
		for _, op := range n.pending[:k] {
			data = applyContent(data, op)
		}
		if k < len(n.pending) && !n.pending[k].truncate {
			op := n.pending[k]
			op.b = op.b[:rng.IntN(len(op.b)+1)]
			data = applyContent(data, op)
		}
		n.data, n.synced, n.pending = data, bytes.Clone(data), nil
		n.reservedBytes = 0
	}
	m.gen++
}

func applyContent(data []byte, op contentOp) []byte {
	if op.truncate {
		if op.size <= int64(len(data)) {
			return data[:op.size]
		}
		return append(data, make([]byte, op.size-int64(len(data)))...)
	}
	end := op.off + int64(len(op.b))
	if end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[op.off:], op.b)
	return data
}

// memFile is a handle on a memNode.
type memFile struct {
	fs   *MemFS
	node *memNode
	name string
	gen  uint64
	rw   bool
	// closed is guarded by fs.mu.
	closed bool
}

func (f *memFile) live(op Op) error {
	if f.gen != f.fs.gen {
		return &os.PathError{Op: op.String(), Path: f.name, Err: ErrCrashed}
	}
	if f.closed {
		return &os.PathError{Op: op.String(), Path: f.name, Err: os.ErrClosed}
	}
	return f.fs.check(op, f.name)
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.live(OpRead); err != nil {
		return 0, err
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.live(OpWrite); err != nil {
		return 0, err
	}
	if !f.rw {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	}
	n := f.node
	want := p
	var err error
	if c := f.fs.capacityBytes; c >= 0 {
		grow := max(off+int64(len(p))-n.footprint(), 0)
		if free := c - f.fs.usedLocked(); grow > free {
			fit := max(int64(len(p))-(grow-max(free, 0)), 0)
			want = p[:fit]
			err = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
		}
	}
	if len(want) > 0 {
		op := contentOp{off: off, b: bytes.Clone(want)}
		n.pending = append(n.pending, op)
		n.data = applyContent(n.data, op)
	}
	return len(want), err
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.live(OpSync); err != nil {
		return err
	}
	f.node.synced = bytes.Clone(f.node.data)
	f.node.pending = nil
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.live(OpTruncate); err != nil {
		return err
	}
	n := f.node
	if c := f.fs.capacityBytes; c >= 0 && size > n.footprint() && size-n.footprint() > c-f.fs.usedLocked() {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.ENOSPC}
	}
	op := contentOp{truncate: true, size: size}
	n.pending = append(n.pending, op)
	n.data = applyContent(n.data, op)
	if n.reservedBytes > size {
		// Like ext4: truncation releases blocks reserved past the new end.
		n.reservedBytes = size
	}
	return nil
}

func (f *memFile) Preallocate(off, length int64, keepSize bool) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.live(OpPreallocate); err != nil {
		return err
	}
	n := f.node
	end := off + length
	if c := f.fs.capacityBytes; c >= 0 && end > n.footprint() && end-n.footprint() > c-f.fs.usedLocked() {
		return &os.PathError{Op: "fallocate", Path: f.name, Err: syscall.ENOSPC}
	}
	n.reservedBytes = max(n.reservedBytes, end)
	if !keepSize && end > int64(len(n.data)) {
		op := contentOp{truncate: true, size: end}
		n.pending = append(n.pending, op)
		n.data = applyContent(n.data, op)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.live(OpStat); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

func (f *memFile) Fd() uintptr  { return InvalidFd }
func (f *memFile) Name() string { return f.name }

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
