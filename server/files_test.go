package server

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/artifact"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

func TestStatAndRemoveFilesThroughTheAPI(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	base := "/v1/sessions/" + s.ID
	ts.ok(t, tok, "PUT", base+"/files?path=d/a.txt&mode=0600", "hello", http.StatusNoContent, nil)

	var fi sandbox.FileInfo
	ts.ok(t, tok, "GET", base+"/stat?path=d/a.txt", nil, http.StatusOK, &fi)
	if fi.Name != "a.txt" || fi.Size != 5 || fi.IsDir || fi.Mode.Perm() != 0o600 {
		t.Fatalf("stat d/a.txt = %+v", fi)
	}
	ts.ok(t, tok, "GET", base+"/stat?path=/workspace/d", nil, http.StatusOK, &fi)
	if !fi.IsDir {
		t.Fatalf("stat of a directory = %+v", fi)
	}
	ts.refused(t, tok, "GET", base+"/stat?path=d/none", nil, http.StatusNotFound, api.KindNotFound, "d/none")
	ts.refused(t, tok, "GET", base+"/stat?path=../etc/passwd", nil, http.StatusBadRequest, api.KindPathEscape)
	ts.refused(t, tok, "GET", base+"/stat", nil, http.StatusBadRequest, api.KindInvalid, "path")

	ts.refused(t, tok, "DELETE", base+"/files?path=d", nil, http.StatusBadRequest, api.KindInvalid, "recursive=1")
	ts.refused(t, tok, "DELETE", base+"/files?path=.", nil, http.StatusBadRequest, api.KindInvalid, "workdir")
	ts.refused(t, tok, "DELETE", base+"/files?path=/etc/passwd", nil, http.StatusBadRequest, api.KindPathEscape)
	ts.refused(t, tok, "DELETE", base+"/files?path=d/none", nil, http.StatusNotFound, api.KindNotFound)
	ts.ok(t, tok, "DELETE", base+"/files?path=d/a.txt", nil, http.StatusNoContent, nil)
	ts.refused(t, tok, "GET", base+"/stat?path=d/a.txt", nil, http.StatusNotFound, api.KindNotFound)
	ts.ok(t, tok, "PUT", base+"/files?path=d/e/b.txt", "b", http.StatusNoContent, nil)
	ts.ok(t, tok, "DELETE", base+"/files?path=d&recursive=1", nil, http.StatusNoContent, nil)
	ts.refused(t, tok, "GET", base+"/stat?path=d", nil, http.StatusNotFound, api.KindNotFound)
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name, body, link string
	typ              byte
}

func makeTar(t *testing.T, ents ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Typeflag == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readTar is an archive's entries: name to content ("/" for a directory,
// "-> target" for a link).
func readTar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read the archive: %v", err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[strings.TrimSuffix(h.Name, "/")] = "/"
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		default:
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

func TestADirectoryTravelsAsATarBothWays(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	base := "/v1/sessions/" + s.ID
	in := makeTar(t,
		tarEntry{name: "src/", typ: tar.TypeDir},
		tarEntry{name: "src/main.go", body: "package main\n"},
		tarEntry{name: "src/empty/", typ: tar.TypeDir},
		tarEntry{name: "README", body: "read me"},
		tarEntry{name: "copy", link: "README", typ: tar.TypeLink},
	)
	var res api.ArchiveResult
	ts.ok(t, tok, "PUT", base+"/archive?path=proj", in, http.StatusOK, &res)
	if res.Files != 3 {
		t.Errorf("the archive wrote %+v, want 3 files", res)
	}
	status, out := ts.call(t, tok, "GET", base+"/archive?path=proj", nil)
	if status != http.StatusOK {
		t.Fatalf("GET archive: %d %s", status, out)
	}
	got := readTar(t, out)
	want := map[string]string{"src": "/", "src/main.go": "package main\n", "src/empty": "/", "README": "read me", "copy": "read me"}
	if len(got) != len(want) {
		t.Errorf("archive of proj = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("archive of proj: %s = %q, want %q", k, got[k], v)
		}
	}
	// What the sandbox sees, and as whom: the session's user owns it.
	var r api.ExecResult
	ts.ok(t, tok, "POST", base+"/exec", api.Exec{Cmd: []string{"sh", "-c", "cat proj/src/main.go; stat -c %u proj/src/empty proj/README"}}, http.StatusOK, &r)
	if string(r.Stdout) != "package main\n1000\n1000\n" {
		t.Errorf("in the sandbox: %q %q", r.Stdout, r.Stderr)
	}
	ts.refused(t, tok, "GET", base+"/archive?path=proj/README", nil, http.StatusBadRequest, api.KindInvalid, "not a directory")
	ts.refused(t, tok, "GET", base+"/archive?path=/etc", nil, http.StatusBadRequest, api.KindPathEscape)
}

func TestAHostileTarIsRefusedAndWritesNothing(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	base := "/v1/sessions/" + s.ID
	for _, c := range []struct {
		name  string
		ents  []tarEntry
		words string
	}{
		{"a name that climbs out with ..", []tarEntry{{name: "ok.txt", body: "x"}, {name: "../evil", body: "x"}}, ".."},
		{"an absolute name", []tarEntry{{name: "ok.txt", body: "x"}, {name: "/etc/evil", body: "x"}}, "absolute"},
		{"a symbolic link out of the tree", []tarEntry{{name: "ok.txt", body: "x"}, {name: "l", link: "/etc", typ: tar.TypeSymlink}}, "l"},
		{"a symbolic link inside the tree", []tarEntry{{name: "ok.txt", body: "x"}, {name: "l", link: "ok.txt", typ: tar.TypeSymlink}}, "symbolic link"},
		{"a hard link to a host file", []tarEntry{{name: "ok.txt", body: "x"}, {name: "h", link: "/etc/shadow", typ: tar.TypeLink}}, "hard link"},
		{"a device", []tarEntry{{name: "ok.txt", body: "x"}, {name: "null", typ: tar.TypeChar}}, "device"},
		{"a fifo", []tarEntry{{name: "ok.txt", body: "x"}, {name: "p", typ: tar.TypeFifo}}, "fifo"},
		{"not a tar at all", nil, "tar"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := []byte("this is not an archive, just text that goes on and on for more than a block? no.")
			if c.ents != nil {
				body = makeTar(t, c.ents...)
			}
			ts.refused(t, tok, "PUT", base+"/archive?path=in", body, http.StatusBadRequest, api.KindInvalid, c.words)
			ts.refused(t, tok, "GET", base+"/stat?path=in", nil, http.StatusNotFound, api.KindNotFound)
		})
	}
	ts.refused(t, tok, "PUT", base+"/archive?path=../out", makeTar(t, tarEntry{name: "a", body: "a"}), http.StatusBadRequest, api.KindPathEscape)

	// A body over the tenant's limit is 413.
	small := newTestServer(t, Config{Defaults: Limits{Body: 1024}})
	stok := small.key(t, "acme")
	ss := small.createSession(t, stok)
	big := makeTar(t, tarEntry{name: "big", body: strings.Repeat("x", 4096)})
	small.refused(t, stok, "PUT", "/v1/sessions/"+ss.ID+"/archive", big, http.StatusRequestEntityTooLarge, api.KindTooLarge)
}

func TestPromoteAnswersTheCheckedFilesWithTheirProvenance(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	base := "/v1/sessions/" + s.ID
	csv := "account,amount\nA-1,100\nA-2,250\n"
	ts.ok(t, tok, "PUT", base+"/files?path=out/totals.csv", csv, http.StatusNoContent, nil)
	ts.ok(t, tok, "PUT", base+"/files?path=notes.txt", "scratch", http.StatusNoContent, nil)

	rules := `{"outputs": [{"glob": "out/*.csv", "types": ["text/csv"], "required": true, "validate": "grep -q '^account,amount$' \"$1\""}]}`
	var got api.Promoted
	ts.ok(t, tok, "POST", base+"/promote", `{"rules": `+rules+`, "run_id": "run-7"}`, http.StatusOK, &got)
	if len(got.Files) != 1 || string(got.Files["out/totals.csv"]) != csv {
		t.Fatalf("promoted files = %v", got.Files)
	}
	var rec artifact.Record
	if err := json.Unmarshal(got.Record, &rec); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(csv))
	if rec.RunID != "run-7" || len(rec.Files) != 1 || rec.Files[0].SHA256 != hex.EncodeToString(sum[:]) || !strings.Contains(rec.Source, s.ID) {
		t.Fatalf("provenance record = %+v", rec)
	}
	var checks []string
	for _, c := range rec.Files[0].Checks {
		checks = append(checks, c.Name)
	}
	sort.Strings(checks)
	if !strings.Contains(strings.Join(checks, ","), "validate") {
		t.Errorf("the record's checks %v do not show the validate command", checks)
	}
	// The validate command's session was closed and gave its quota back.
	if n := ts.sessionCount(t, tok); n != 1 {
		t.Errorf("the tenant has %d sessions after a promote, want 1", n)
	}

	ts.refused(t, tok, "POST", base+"/promote", `{"rules": {"outputs": [{"glob": "out/*.csv", "max_size": "10B"}]}}`, http.StatusBadRequest, api.KindInvalid, "out/totals.csv", "nothing promoted")
	ts.refused(t, tok, "POST", base+"/promote", `{"rules": {"outputs": [{"glob": "out/*.csv", "json_schema": "/etc/passwd"}]}}`, http.StatusBadRequest, api.KindInvalid, "json_schema")
	ts.refused(t, tok, "POST", base+"/promote", `{"rules": {"outputs": [{"glob": "../x"}]}}`, http.StatusBadRequest, api.KindInvalid, "..")
	ts.refused(t, tok, "POST", base+"/promote", `{}`, http.StatusBadRequest, api.KindInvalid, "no rules")
}
