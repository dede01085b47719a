package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// node describes one path of a test tree.
type node struct {
	path   string
	mode   fs.FileMode // permission bits (and setuid etc.)
	data   string      // file content
	dir    bool
	link   string // symlink target
	hard   string // hard link to this earlier path
	fifo   bool
	mtimeS int64 // seconds since epoch; 0 = a fixed default
}

var testMTime = time.Date(2024, 3, 4, 5, 6, 7, 123456789, time.UTC)

// makeTree creates nodes under root (which must exist), setting modes and
// times after everything exists.
func makeTree(t testing.TB, root string, nodes []node) {
	t.Helper()
	for _, n := range nodes {
		p := filepath.Join(root, n.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case n.dir:
			err = os.Mkdir(p, 0o755)
		case n.link != "":
			err = os.Symlink(n.link, p)
		case n.hard != "":
			err = os.Link(filepath.Join(root, n.hard), p)
		case n.fifo:
			err = unix.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, []byte(n.data), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		p := filepath.Join(root, n.path)
		if n.link == "" && n.hard == "" && !n.fifo && n.mode != 0 {
			if err := os.Chmod(p, goMode(n.mode)); err != nil {
				t.Fatal(err)
			}
		}
		mt := testMTime
		if n.mtimeS != 0 {
			mt = time.Unix(n.mtimeS, 0)
		}
		ts := unix.NsecToTimespec(mt.UnixNano())
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
}

// treeState renders a tree as sorted lines: path type mode mtime content.
func treeState(t testing.TB, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := rel + " " + fi.Mode().String()
		if rel != "." {
			line += " " + fi.ModTime().UTC().Format(time.RFC3339Nano)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if len(data) > 64 {
				line += " " + short(sha(data))
			} else {
				line += " " + string(data)
			}
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// openStore opens a store in a fresh temp dir with a quiet logger.
func openStore(t testing.TB, lim Limits) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "store"), Options{Logger: quietLogger(), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// randomData is n pseudo-random bytes (incompressible), deterministic.
func randomData(seed uint64, n int) []byte {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// textData is n bytes of compressible text.
func textData(seed uint64, n int) []byte {
	words := []string{"ledger", "invoice", "total", "balance", "account", "2024", "EUR", "net", "due", "\n"}
	r := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

func ctx() context.Context { return context.Background() }

// goMode turns Unix permission bits (0o4755) into an fs.FileMode, whose
// setuid, setgid and sticky are flags of their own.
func goMode(m fs.FileMode) fs.FileMode {
	out := m & 0o777
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}
