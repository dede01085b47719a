package wsfs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// Watching a workspace with inotify. The watch runs on the host, on the
// root's directories: inotify marks inodes, so a write made inside the
// sandbox, through whichever mount, is seen on the host's view of the
// same directory.
//
// Threat: the tree is the sandbox's to shape. A symlink must not lead the
// watch out of the root (a watch on a host directory would tell the
// caller about host files): the watched path is opened with the root's
// resolution rules, and every directory below it by one name at a time
// with O_NOFOLLOW, so a link is never followed. Directories cost the
// host's user one inotify watch each (a per-user kernel count that the
// host's other programs share): a watch holds at most MaxDirs of them
// and says so with an overflow past it. Events queue up to Queue; a
// reader that falls behind loses events and is told so by an overflow,
// never by memory growing without bound.

// DefaultWatchDirs is how many directories one watch follows at most
// unless WatchOptions says otherwise.
const DefaultWatchDirs = 8192

// WatchOptions adjust Root.Watch.
type WatchOptions struct {
	// Exclude lists root-relative paths neither watched nor reported (the
	// denied paths of a policy).
	Exclude []string
	// MaxDirs bounds the directories followed; 0 means DefaultWatchDirs.
	MaxDirs int
	// Queue bounds the events held for the reader; 0 means
	// sandbox.WatchQueue.
	Queue int
}

// moveWait is how long a rename's first half waits for its second before
// it is reported as a removal (the path moved out of the watched tree).
const moveWait = 20 * time.Millisecond

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// Watch reports changes under the directory rel and every directory
// below it (see sandbox.Watcher); event paths are relative to the root.
func (r *Root) Watch(ctx context.Context, rel string, o WatchOptions) (<-chan sandbox.WatchEvent, error) {
	const op = "wsfs: watch"
	clean, err := cleanRel(rel)
	if err != nil {
		return nil, mapErr(op, rel, err)
	}
	if o.MaxDirs <= 0 {
		o.MaxDirs = DefaultWatchDirs
	}
	if o.Queue <= 0 {
		o.Queue = sandbox.WatchQueue
	}
	w := &watcher{r: r, top: clean, opts: o, dirs: map[int32]string{}, wds: map[string]int32{}}
	for _, e := range o.Exclude {
		if c, err := cleanRel(e); err == nil {
			w.exclude = append(w.exclude, c)
		}
	}
	if w.excluded(clean) {
		return nil, sandbox.Wrap(op+" "+rel, sandbox.ErrPathEscape, errors.New("the path is excluded (denied by the policy)"))
	}
	if w.fd, err = unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK); err != nil {
		return nil, sandbox.Wrap(op, sandbox.ErrUnavailable, fmt.Errorf("inotify_init1: %w", err))
	}
	if w.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(w.fd)
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("eventfd: %w", err))
	}
	w.out = make(chan sandbox.WatchEvent, o.Queue)
	fd, err := w.openDir(clean)
	if err == nil {
		err = w.addTree(fd, clean, false)
	}
	if err != nil {
		w.close()
		return nil, mapErr(op, rel, err)
	}
	stop := context.AfterFunc(ctx, func() { _, _ = unix.Write(w.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0}) })
	go func() {
		defer close(w.out)
		defer w.close()
		defer stop()
		w.loop(ctx)
	}()
	return w.out, nil
}

// watcher is one Watch: an inotify instance, the directories it follows
// and the reader's queue.
type watcher struct {
	r       *Root
	top     string
	opts    WatchOptions
	exclude []string
	fd      int // the inotify instance
	wake    int // an eventfd written when the context ends
	dirs    map[int32]string
	wds     map[string]int32
	out     chan sandbox.WatchEvent
	// lost holds why events were dropped until an overflow says so.
	lost string
	// lastWrite is the path of the last event sent when it was a write,
	// so that a run of writes to one file within one read of the
	// inotify queue is one event.
	lastWrite string
	// moved is a rename's first half, waiting for its second.
	moved *movedFrom
	// full is set once MaxDirs is reached.
	full  bool
	ended bool
}

type movedFrom struct {
	cookie uint32
	rel    string
	isDir  bool
	at     time.Time
}

func (w *watcher) close() {
	unix.Close(w.fd)
	unix.Close(w.wake)
}

func (w *watcher) excluded(rel string) bool {
	for _, e := range w.exclude {
		if e == "." || rel == e || strings.HasPrefix(rel, e+"/") {
			return true
		}
	}
	return false
}

// openDir opens the root-relative directory rel under the root's rules.
func (w *watcher) openDir(rel string) (int, error) {
	root, release, err := w.r.hold("watch")
	if err != nil {
		return -1, err
	}
	defer release()
	return w.r.openIn(root, rel, unix.O_PATH|unix.O_DIRECTORY)
}

// addTree watches the directory fd (which it closes) at rel and every
// directory below it. With report, what it finds below is reported as
// created: it appeared before its directory was watched.
func (w *watcher) addTree(fd int, rel string, report bool) error {
	defer unix.Close(fd)
	if len(w.dirs) >= w.opts.MaxDirs {
		if !w.full {
			w.full = true
			w.drop(fmt.Sprintf("the watch reached its limit of %d directories; %s and directories made past it are not watched", w.opts.MaxDirs, rel))
		}
		return nil
	}
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if errors.Is(err, unix.ENOSPC) {
		w.drop(fmt.Sprintf("the host's inotify watch limit (fs.inotify.max_user_watches) was reached at %s", rel))
		return nil
	}
	if err != nil {
		return fmt.Errorf("inotify_add_watch %s: %w", rel, err)
	}
	if old, ok := w.wds[rel]; ok && old != int32(wd) {
		delete(w.dirs, old)
	}
	w.dirs[int32(wd)] = rel
	w.wds[rel] = int32(wd)
	dir, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", rel, err)
	}
	names, err := readNames(dir)
	unix.Close(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	for _, name := range names {
		child := path.Join(rel, name)
		if w.excluded(child) {
			continue
		}
		// One name, no link followed: a child swapped for a symlink
		// fails here (ELOOP or ENOTDIR) instead of leading out.
		cfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		isDir := err == nil
		if report {
			w.send(sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: child, IsDir: isDir})
		}
		if !isDir {
			continue
		}
		if err := w.addTree(cfd, child, report); err != nil {
			return err
		}
	}
	return nil
}

// readNames lists the directory dir, without "." and "..".
func readNames(dir int) ([]string, error) {
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// loop reads inotify events until the context ends or the watched
// directory goes.
func (w *watcher) loop(ctx context.Context) {
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.wake), Events: unix.POLLIN}}
	for !w.ended && ctx.Err() == nil {
		timeout := -1
		if w.moved != nil || w.lost != "" {
			timeout = int(moveWait / time.Millisecond)
		}
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			w.drop(fmt.Sprintf("poll: %v", err))
			return
		}
		if w.moved != nil && (n == 0 || time.Since(w.moved.at) >= moveWait) {
			w.movedAway()
		}
		if w.lost != "" {
			w.send(sandbox.WatchEvent{}) // only delivers the overflow, if room
		}
		if n <= 0 || fds[0].Revents&unix.POLLIN == 0 {
			continue
		}
		m, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			w.drop(fmt.Sprintf("read inotify events: %v", err))
			return
		}
		w.handleAll(buf[:m])
		// Writes coalesce within what one read returns, not beyond: a
		// file written again later, with nothing else in between, is
		// reported again.
		w.lastWrite = ""
	}
}

// handleAll handles a buffer of inotify events.
func (w *watcher) handleAll(buf []byte) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameAt := off + unix.SizeofInotifyEvent
		end := nameAt + int(ev.Len)
		if end > len(buf) {
			return
		}
		name := strings.TrimRight(string(buf[nameAt:end]), "\x00")
		off = end
		w.handle(ev.Wd, ev.Mask, ev.Cookie, name)
		if w.ended {
			return
		}
	}
}

func (w *watcher) handle(wd int32, mask, cookie uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.drop("the kernel's inotify queue overflowed (fs.inotify.max_queued_events)")
		return
	}
	dir, ok := w.dirs[wd]
	if mask&unix.IN_IGNORED != 0 {
		if ok && w.wds[dir] == wd {
			delete(w.wds, dir)
		}
		delete(w.dirs, wd)
		if dir == w.top && ok {
			w.ended = true
		}
		return
	}
	if !ok {
		return
	}
	if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		// The parent reports a directory below the top going; only the
		// top itself, which has no watched parent, is reported here.
		if dir == w.top {
			w.flushMove()
			w.send(sandbox.WatchEvent{Op: sandbox.WatchRemove, Path: dir, IsDir: true})
			w.ended = true
		}
		return
	}
	if mask&unix.IN_UNMOUNT != 0 {
		if dir == w.top {
			w.ended = true
		}
		return
	}
	rel := path.Join(dir, name)
	if w.excluded(rel) {
		return
	}
	isDir := mask&unix.IN_ISDIR != 0
	if mask&unix.IN_MOVED_TO == 0 || w.moved == nil || w.moved.cookie != cookie {
		w.flushMove()
	}
	switch {
	case mask&unix.IN_CREATE != 0:
		w.send(sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: rel, IsDir: isDir})
		if isDir {
			w.addNew(rel)
		}
	case mask&unix.IN_MODIFY != 0:
		if w.lastWrite != rel {
			w.send(sandbox.WatchEvent{Op: sandbox.WatchWrite, Path: rel})
			w.lastWrite = rel
		}
	case mask&unix.IN_DELETE != 0:
		w.send(sandbox.WatchEvent{Op: sandbox.WatchRemove, Path: rel, IsDir: isDir})
	case mask&unix.IN_MOVED_FROM != 0:
		w.moved = &movedFrom{cookie: cookie, rel: rel, isDir: isDir, at: time.Now()}
	case mask&unix.IN_MOVED_TO != 0:
		if m := w.moved; m != nil && m.cookie == cookie {
			w.moved = nil
			w.send(sandbox.WatchEvent{Op: sandbox.WatchRename, Path: rel, OldPath: m.rel, IsDir: isDir})
			if isDir {
				w.renameTree(m.rel, rel)
			}
			return
		}
		w.send(sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: rel, IsDir: isDir})
		if isDir {
			w.addNew(rel)
		}
	}
}

// addNew watches a directory that appeared at rel, reporting what it
// already holds.
func (w *watcher) addNew(rel string) {
	fd, err := w.openDir(rel)
	if err != nil {
		return // gone or replaced already: later events say what became of it
	}
	if err := w.addTree(fd, rel, true); err != nil {
		w.drop(fmt.Sprintf("watch the new directory %s: %v", rel, err))
	}
}

// flushMove reports a rename's first half that found no second: the path
// left the watched tree.
func (w *watcher) flushMove() {
	if w.moved != nil {
		w.movedAway()
	}
}

func (w *watcher) movedAway() {
	m := w.moved
	w.moved = nil
	w.send(sandbox.WatchEvent{Op: sandbox.WatchRemove, Path: m.rel, IsDir: m.isDir})
	if m.isDir {
		for wd, d := range w.dirs {
			if d == m.rel || strings.HasPrefix(d, m.rel+"/") {
				_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
				delete(w.dirs, wd)
				delete(w.wds, d)
			}
		}
	}
}

// renameTree moves the paths of the watched directories under from to to.
func (w *watcher) renameTree(from, to string) {
	for wd, d := range w.dirs {
		if d == from || strings.HasPrefix(d, from+"/") {
			nd := to + strings.TrimPrefix(d, from)
			delete(w.wds, d)
			w.dirs[wd] = nd
			w.wds[nd] = wd
		}
	}
}

// drop notes that events were lost, and why; an overflow tells the
// reader as soon as the queue has room.
func (w *watcher) drop(why string) {
	if w.lost == "" {
		w.lost = why
	}
	w.send(sandbox.WatchEvent{})
}

// send queues ev for the reader (an empty ev only delivers a pending
// overflow). A full queue drops ev and remembers that it did.
func (w *watcher) send(ev sandbox.WatchEvent) {
	now := time.Now()
	if w.lost != "" {
		select {
		case w.out <- sandbox.WatchEvent{Op: sandbox.WatchOverflow, Err: w.lost, Time: now}:
			w.lost = ""
			w.lastWrite = ""
		default:
		}
	}
	if ev.Op == "" {
		return
	}
	if w.lost != "" {
		return // still full
	}
	if ev.Op != sandbox.WatchWrite {
		w.lastWrite = ""
	}
	ev.Time = now
	select {
	case w.out <- ev:
	default:
		w.lost = fmt.Sprintf("the reader fell behind: more than %d events were waiting", cap(w.out))
		w.lastWrite = ""
	}
}

// Watches are the watches of one session, ended together when it stops
// or closes. The zero value is ready to use.
type Watches struct {
	mu   sync.Mutex
	next int
	live map[int]context.CancelFunc
}

// Watch is r.Watch, ended by End as well as by ctx.
func (ws *Watches) Watch(ctx context.Context, r *Root, rel string, o WatchOptions) (<-chan sandbox.WatchEvent, error) {
	ctx, cancel := context.WithCancel(ctx)
	ch, err := r.Watch(ctx, rel, o)
	if err != nil {
		cancel()
		return nil, err
	}
	ws.mu.Lock()
	if ws.live == nil {
		ws.live = map[int]context.CancelFunc{}
	}
	ws.next++
	id := ws.next
	ws.live[id] = cancel
	ws.mu.Unlock()
	context.AfterFunc(ctx, func() {
		ws.mu.Lock()
		delete(ws.live, id)
		ws.mu.Unlock()
	})
	return ch, nil
}

// End ends every watch.
func (ws *Watches) End() {
	ws.mu.Lock()
	live := ws.live
	ws.live = nil
	ws.mu.Unlock()
	for _, cancel := range live {
		cancel()
	}
}
