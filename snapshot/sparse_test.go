package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// sparseSize is the apparent size of the test's sparse file; a dense
// restore would allocate all of it.
const sparseSize = 64 << 20

// makeSparse makes, under dir, the file (truncate -s, a little
// data in the middle) and returns its path and its data.
func makeSparse(t testing.TB, dir string) (string, []byte) {
	t.Helper()
	p := filepath.Join(dir, "sparse.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(sparseSize); err != nil {
		t.Fatal(err)
	}
	data := textData(3, 8192)
	if _, err := f.WriteAt(data, 40<<20); err != nil {
		t.Fatal(err)
	}
	if allocated(t, p) >= sparseSize/2 {
		t.Skipf("the file system of %s does not keep holes", dir)
	}
	return p, data
}

// allocated is the disk space a file takes (st_blocks).
func allocated(t testing.TB, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// checkSparseRestore checks that p has the sparse file's content and
// size and did not allocate its holes.
func checkSparseRestore(t *testing.T, p string, data []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, sparseSize)
	copy(want[40<<20:], data)
	if !bytes.Equal(got, want) {
		t.Fatalf("the restored file differs from the saved one (%d bytes, want %d)", len(got), len(want))
	}
	if a := allocated(t, p); a > 1<<20 {
		t.Errorf("the restored file takes %d bytes on disk for %d of data: its holes were filled", a, len(data))
	}
}

func TestASparseFileIsRestoredWithItsHoles(t *testing.T) {
	src := t.TempDir()
	_, data := makeSparse(t, src)
	s := openStore(t, Limits{})
	info, err := s.SaveWithOptions(ctx(), src, SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != FormatVersion || info.Total.Bytes != sparseSize {
		t.Errorf("version %d, total %d: want version %d (holes) and the apparent size", info.Version, info.Total.Bytes, FormatVersion)
	}
	if info.StoredBytes > 1<<20 {
		t.Errorf("the store took %d bytes for %d of data", info.StoredBytes, len(data))
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := s.Restore(ctx(), info.ID, dst, 0); err != nil {
		t.Fatal(err)
	}
	checkSparseRestore(t, filepath.Join(dst, "sparse.img"), data)
	if err := s.Verify(ctx(), info.ID); err != nil {
		t.Errorf("verify: %v", err)
	}
}

// Snapshots without holes keep the format every earlier release reads.
func TestASnapshotWithoutHolesIsWrittenInTheFirstFormat(t *testing.T) {
	s := openStore(t, Limits{})
	info, err := s.SaveWithOptions(ctx(), workspace(t), SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.manifestPath(info.ID))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte(`{"version":1,`)) || bytes.Contains(data, []byte(`"holes"`)) {
		t.Errorf("manifest %.80s..., want version 1 and no holes", data)
	}
}

// The store in testdata/store-v1 was written by the release before holes
// (commit 0d94cd3); every later one must restore it.
func TestASnapshotOfTheFirstFormatStillRestores(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dir, os.DirFS("testdata/store-v1")); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx())
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v, %v; want the one snapshot", list, err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := s.Restore(ctx(), list[0].ID, dst, 0); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/store-v1.tree")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(treeState(t, dst)); got != strings.TrimSpace(string(want)) {
		t.Errorf("restored tree:\n%s\nwant:\n%s", got, want)
	}
}

// An export carries the holes, so an import (zstd-compressed, as the CLI
// writes it) gives back the same snapshot, restored as sparse, and holes
// do not count as an expansion.
func TestExportThenImportKeepsTheHoles(t *testing.T) {
	src := t.TempDir()
	_, data := makeSparse(t, src)
	a := openStore(t, Limits{})
	info, err := a.SaveWithOptions(ctx(), src, SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	if err := a.Export(ctx(), info.ID, zw); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	b := openStore(t, Limits{MaxExpansionRatio: 200, ExpansionSlack: 1 << 20})
	got, err := b.Import(ctx(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != info.ID {
		t.Errorf("imported ID %s, exported %s", short(got.ID), short(info.ID))
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := b.Restore(ctx(), got.ID, dst, 0); err != nil {
		t.Fatal(err)
	}
	checkSparseRestore(t, filepath.Join(dst, "sparse.img"), data)
}

func TestImportRefusesHolesThatLie(t *testing.T) {
	tests := []struct {
		name  string
		holes string
		data  string
		want  string
	}{
		{"data where the archive declares a hole", "0+4", "abcdefgh", "hole"},
		{"a hole beyond the file", "4+8", "\x00\x00\x00\x00\x00\x00\x00\x00", "beyond the size"},
		{"holes out of order", "6+1,2+1", "\x00\x00\x00\x00\x00\x00\x00\x00", "out of order"},
		{"a malformed hole", "x+1", "\x00", "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := makeTar(t, []tarEntry{{name: "f", data: tt.data, pax: map[string]string{paxHoles: tt.holes}}})
			s := openStore(t, Limits{})
			_, err := s.Import(ctx(), bytes.NewReader(raw))
			if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a refusal with %q", err, tt.want)
			}
		})
	}
}

// Holes do not lift the bound on content: a declared hole of 64 GiB is
// refused like 64 GiB of data.
func TestImportBoundsTheApparentSizeOfSparseFiles(t *testing.T) {
	raw := makeTar(t, []tarEntry{{name: "f", data: string(make([]byte, 4<<20)), pax: map[string]string{paxHoles: "0+4194304"}}})
	s := openStore(t, Limits{MaxTotalBytes: 1 << 20})
	if _, err := s.Import(ctx(), bytes.NewReader(raw)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("err = %v, want the content limit", err)
	}
}

func TestManifestsWithBadHolesAreRefused(t *testing.T) {
	file := func(holes ...Hole) Entry {
		return Entry{Path: "f", Type: TypeFile, Size: 8, SHA256: strings.Repeat("a", 64), Holes: holes}
	}
	tests := []struct {
		name    string
		version int
		entry   Entry
		want    string
	}{
		{"holes in a version 1 manifest", 1, file(Hole{0, 4}), "version 1"},
		{"a hole past the end", 2, file(Hole{4, 8}), "beyond"},
		{"an empty hole", 2, file(Hole{2, 0}), "empty"},
		{"adjacent holes", 2, file(Hole{0, 2}, Hole{2, 2}), "adjacent"},
		{"holes on a directory", 2, Entry{Path: "f", Type: TypeDir, Holes: []Hole{{0, 1}}}, "no holes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Manifest{Header: Header{Version: tt.version}, Entries: []Entry{{Path: ".", Type: TypeDir}, tt.entry}}
			m.computeTotals()
			if err := m.validate(Limits{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("validate: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// A snapshot is bounded by its session's disk limit: a sandbox with
// --disk 50M can make a file of any apparent size, but not a snapshot
// of it, nor be seeded from one, wherever the snapshot came from.
func TestASnapshotIsBoundedByItsSessionsDiskLimit(t *testing.T) {
	const limit = 50 << 20
	src := t.TempDir()
	makeSparse(t, src)
	s := openStore(t, Limits{})
	_, err := s.Save(ctx(), src, nil, limit)
	if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "over the 50.0 MiB") || !strings.Contains(err.Error(), "disk limit") {
		t.Fatalf("save over the limit: %v, want a refusal naming the 50.0 MiB disk limit", err)
	}
	if list, _ := s.List(ctx()); len(list) != 0 {
		t.Errorf("a refused save is listed: %v", list)
	}
	id, err := s.Save(ctx(), src, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The same snapshot from outside: exported, imported into another store.
	var buf bytes.Buffer
	if err := s.Export(ctx(), id, &buf); err != nil {
		t.Fatal(err)
	}
	other := openStore(t, Limits{})
	imported, err := other.Import(ctx(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		store *Store
		id    string
	}{{s, id}, {other, imported.ID}} {
		dst := filepath.Join(t.TempDir(), "ws")
		err := c.store.Restore(ctx(), c.id, dst, limit)
		if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "over the 50.0 MiB") {
			t.Errorf("restore into a session of 50 MiB: %v, want a refusal naming the limit", err)
		}
		if _, serr := os.Stat(dst); serr == nil {
			t.Errorf("a refused restore made %s", dst)
		}
	}
	if err := s.Restore(ctx(), id, filepath.Join(t.TempDir(), "ws"), sparseSize); err != nil {
		t.Errorf("restore within the limit: %v", err)
	}
}
