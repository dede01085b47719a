package server

import (
	"archive/tar"
	"bytes"
	"net/http"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

func tarOf(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(bytes.Repeat([]byte("x"), int(h.Size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSnapshotsExportAndImportAsTarsPerTenant(t *testing.T) {
	ts := newTestServer(t, Config{})
	a, b := ts.key(t, "tenant-a"), ts.key(t, "tenant-b")
	bs := ts.createSession(t, b)
	ts.ok(t, b, "PUT", "/v1/sessions/"+bs.ID+"/files?path=d/f.txt", "b's", http.StatusNoContent, nil)
	var snap api.Snapshot
	ts.ok(t, b, "POST", "/v1/sessions/"+bs.ID+"/snapshots", nil, http.StatusCreated, &snap)

	ts.refused(t, a, "GET", "/v1/snapshots/"+snap.ID+"/export", nil, http.StatusNotFound, api.KindNotFound, snap.ID)
	status, archive := ts.call(t, b, "GET", "/v1/snapshots/"+snap.ID+"/export", nil)
	if status != http.StatusOK || len(archive) == 0 {
		t.Fatalf("export: %d, %d bytes", status, len(archive))
	}

	// Tenant A imports the archive: a snapshot of its own that seeds its
	// sessions.
	var imported api.Snapshot
	ts.ok(t, a, "POST", "/v1/snapshots", archive, http.StatusCreated, &imported)
	var as api.Session
	ts.ok(t, a, "POST", "/v1/sessions", api.CreateSession{Spec: sandbox.Spec{Snapshot: imported.ID}}, http.StatusCreated, &as)
	if status, data := ts.call(t, a, "GET", "/v1/sessions/"+as.ID+"/files?path=d/f.txt", nil); status != http.StatusOK || string(data) != "b's" {
		t.Fatalf("a session seeded from the import reads %d %q", status, data)
	}

	for _, tc := range []struct {
		name string
		tar  []byte
		word string
	}{
		{"traversal", tarOf(t, &tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}), "evil"},
		{"an absolute name", tarOf(t, &tar.Header{Name: "/etc/cron.d/x", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}), "cron.d"},
		{"a symlink out of the tree", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../etc", Mode: 0o777}), "l"},
		{"a device", tarOf(t, &tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}), "null"},
		{"not a tar", []byte("hello"), "tar"},
	} {
		t.Run("an archive with "+tc.name+" is refused", func(t *testing.T) {
			ts.refused(t, a, "POST", "/v1/snapshots", tc.tar, http.StatusBadRequest, api.KindInvalid, tc.word)
		})
	}
	var list api.SnapshotList
	ts.ok(t, a, "GET", "/v1/snapshots", nil, http.StatusOK, &list)
	if len(list.Snapshots) != 1 {
		t.Fatalf("tenant A lists %d snapshots, want its one import: %+v", len(list.Snapshots), list.Snapshots)
	}
}
