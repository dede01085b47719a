package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/agentbox/agentbox/sandbox"
)

func TestExportThenImportGivesTheSameSnapshotID(t *testing.T) {
	a := openStore(t, Limits{})
	info, err := a.SaveWithOptions(ctx(), workspace(t), SaveOptions{Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.Export(ctx(), info.ID, &buf); err != nil {
		t.Fatal(err)
	}
	b := openStore(t, Limits{})
	got, err := b.Import(ctx(), bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != info.ID {
		t.Errorf("imported ID %s, exported %s", short(got.ID), short(info.ID))
	}
	ra, rb := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if err := a.Restore(ctx(), info.ID, ra, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(ctx(), got.ID, rb, 0); err != nil {
		t.Fatal(err)
	}
	if treeState(t, ra) != treeState(t, rb) {
		t.Error("the imported snapshot restores a different tree")
	}
}

// tarEntry is one header (and content) of a test archive.
type tarEntry struct {
	name, link string
	typ        byte
	data       string
	pax        map[string]string
}

func makeTar(t testing.TB, ents []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: typ, Mode: 0o644, ModTime: time.Unix(1700000000, 0), PAXRecords: e.pax}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(e.data))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func TestImportAcceptsAPlainTarAndCreatesMissingParents(t *testing.T) {
	s := openStore(t, Limits{})
	info, err := s.Import(ctx(), bytes.NewReader(makeTar(t, []tarEntry{
		{name: "./a/b/c.txt", data: "deep"},
		{name: "a/", typ: tar.TypeDir},
		{name: "a/link", typ: tar.TypeSymlink, link: "b/c.txt"},
		{name: "a/hard", typ: tar.TypeLink, link: "a/b/c.txt"},
	})))
	if err != nil {
		t.Fatal(err)
	}
	if info.Total.Files != 2 || info.Total.Dirs != 3 || info.Total.Symlinks != 1 {
		t.Errorf("totals %+v", info.Total)
	}
	dst := filepath.Join(t.TempDir(), "r")
	if err := s.Restore(ctx(), info.ID, dst, 0); err != nil {
		t.Fatal(err)
	}
	if st := treeState(t, dst); !strings.Contains(st, "a/hard -rw-r--r-- 2023-11-14T22:13:20Z deep") {
		t.Errorf("restored tree:\n%s", st)
	}
}

func TestImportRefusesHostileArchives(t *testing.T) {
	tests := []struct {
		name    string
		ents    []tarEntry
		lim     Limits
		inError string
	}{
		{"a name climbing out with ..", []tarEntry{{name: "../evil", data: "x"}}, Limits{}, "climbs out"},
		{"a name climbing out midway", []tarEntry{{name: "a/../../evil", data: "x"}}, Limits{}, "climbs out"},
		{"an absolute name", []tarEntry{{name: "/etc/cron.d/evil", data: "x"}}, Limits{}, "absolute"},
		{"an absolute symlink", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: "/etc"}}, Limits{}, "leaves the root"},
		{"a symlink that climbs out", []tarEntry{{name: "a/l", typ: tar.TypeSymlink, link: "../../x"}}, Limits{}, "leaves the root"},
		{"a chained symlink escape", []tarEntry{
			{name: "d/up", typ: tar.TypeSymlink, link: ".."},
			{name: "l", typ: tar.TypeSymlink, link: "d/up/../x"},
		}, Limits{}, "climbs after descending"},
		{"a file written through a symlink", []tarEntry{
			{name: "l", typ: tar.TypeSymlink, link: "d"},
			{name: "l/x", data: "through the link"},
		}, Limits{}, "not a directory"},
		{"a character device", []tarEntry{{name: "null", typ: tar.TypeChar}}, Limits{}, "device"},
		{"a block device", []tarEntry{{name: "sda", typ: tar.TypeBlock}}, Limits{}, "device"},
		{"a fifo", []tarEntry{{name: "p", typ: tar.TypeFifo}}, Limits{}, "fifo"},
		{"a hard link to a host file", []tarEntry{{name: "h", typ: tar.TypeLink, link: "/etc/shadow"}}, Limits{}, "absolute"},
		{"a hard link to a later entry", []tarEntry{{name: "h", typ: tar.TypeLink, link: "x"}, {name: "x", data: "y"}}, Limits{}, "earlier file"},
		{"a duplicated file", []tarEntry{{name: "x", data: "1"}, {name: "x", data: "2"}}, Limits{}, "twice"},
		{"a file over a directory", []tarEntry{{name: "d/x", data: "1"}, {name: "d", data: "2"}}, Limits{}, "twice"},
		{"a wrong sha256 record", []tarEntry{{name: "x", data: "1", pax: map[string]string{paxSHA256: emptySHA256}}}, Limits{}, "archive says"},
		{"too many entries", []tarEntry{{name: "a", data: "1"}, {name: "b", data: "2"}, {name: "c", data: "3"}}, Limits{MaxEntries: 3}, "entries"},
		{"too many bytes", []tarEntry{{name: "a", data: "12345"}, {name: "b", data: "67890"}}, Limits{MaxTotalBytes: 8}, "limit of 8"},
	}
	for _, tt := range tests {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			s := openStore(t, tt.lim)
			_, err := s.Import(ctx(), bytes.NewReader(makeTar(t, tt.ents)))
			if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), tt.inError) {
				t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tt.inError)
			}
			if list, _ := s.List(ctx()); len(list) != 0 {
				t.Errorf("a refused import is listed: %v", list)
			}
		})
	}
}

func TestImportRefusesADecompressionBomb(t *testing.T) {
	// 8 MiB of zeros compresses to a few hundred bytes: far past 200x.
	raw := makeTar(t, []tarEntry{{name: "zeros", data: string(make([]byte, 8<<20))}})
	enc, _ := zstd.NewWriter(nil)
	bomb := enc.EncodeAll(raw, nil)
	s := openStore(t, Limits{MaxExpansionRatio: 200, ExpansionSlack: 1 << 20})
	_, err := s.Import(ctx(), bytes.NewReader(bomb))
	if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "decompression bomb") {
		t.Fatalf("err = %v, want a refused decompression bomb", err)
	}
}

func TestImportReadsZstdAndGzipArchives(t *testing.T) {
	raw := makeTar(t, []tarEntry{{name: "x.txt", data: strings.Repeat("abc", 1000)}})
	enc, _ := zstd.NewWriter(nil)
	s := openStore(t, Limits{})
	info, err := s.Import(ctx(), bytes.NewReader(enc.EncodeAll(raw, nil)))
	if err != nil || info.Total.Bytes != 3000 {
		t.Fatalf("zstd import: %+v, %v", info.Total, err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	info, err = s.Import(ctx(), &gz)
	if err != nil || info.Total.Bytes != 3000 {
		t.Fatalf("gzip import: %+v, %v", info.Total, err)
	}
}
