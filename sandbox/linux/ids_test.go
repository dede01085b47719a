package linux

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// etcWith writes an /etc with the given files into a fresh directory.
func etcWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTheIDBlockIsTheAgentboxEntryOrAFreeDefault(t *testing.T) {
	accounts := map[string]string{
		"passwd": "root:x:0:0::/root:/bin/sh\nme:x:1000:1000::/home/me:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
		"group":  "root:x:0:\nme:x:1000:\n",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range accounts {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name       string
		etc        map[string]string
		configured IDRange
		want       IDRange
		wantErr    string
	}{
		{"without an entry the default block is used", accounts, IDRange{}, defaultIDs, ""},
		{"the agentbox entries of subuid and subgid are used", with(map[string]string{
			"subuid": "me:100000:65536\nagentbox:300000000:6553600\n", "subgid": "agentbox:300000000:6553600\n"}),
			IDRange{}, IDRange{300000000, 6553600}, ""},
		{"a configured block wins", accounts, IDRange{400000000, 655360}, IDRange{400000000, 655360}, ""},
		{"subuid and subgid entries that differ are refused", with(map[string]string{
			"subuid": "agentbox:300000000:6553600\n", "subgid": "agentbox:300000000:65536\n"}),
			IDRange{}, IDRange{}, "differ"},
		{"a block holding a host account's uid is refused", with(map[string]string{
			"passwd": accounts["passwd"] + "svc:x:1879048200:1879048200::/:/bin/false\n"}),
			IDRange{}, IDRange{}, `holds id 1879048200 of "svc"`},
		{"a block overlapping someone else's subordinate range is refused", with(map[string]string{
			"subuid": "podman:1879000000:100000\n"}),
			IDRange{}, IDRange{}, `overlaps "podman"'s range`},
		{"a block too small for one session is refused", accounts, IDRange{400000000, 1000}, IDRange{}, "fewer than the 65536 ids"},
		{"a malformed subuid line is refused with its place", with(map[string]string{"subuid": "agentbox:300000000\n"}), IDRange{}, IDRange{}, "subuid:1: want name:start:count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := findIDs(tt.configured, etcWith(t, tt.etc))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("findIDs = %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("findIDs = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestEverySessionHasASlotOfItsOwnUntilReleased(t *testing.T) {
	state := t.TempDir()
	s := idSlots{block: IDRange{Base: 500000000, Count: 3 * sessionIDs}, dir: filepath.Join(state, "ids")}
	bases := map[uint32]string{}
	for _, id := range []string{"a", "b", "c"} {
		if err := os.Mkdir(filepath.Join(state, id), 0o700); err != nil {
			t.Fatal(err)
		}
		b, err := s.claim(filepath.Join(state, id))
		if err != nil {
			t.Fatalf("claim for %s: %v", id, err)
		}
		if other, taken := bases[b]; taken {
			t.Fatalf("sessions %s and %s share the ids from %d", other, id, b)
		}
		if (b-s.block.Base)%sessionIDs != 0 || !s.block.contains(uint64(b)) {
			t.Fatalf("slot base %d is not a slot of %v", b, s.block)
		}
		bases[b] = id
	}
	if _, err := s.claim(filepath.Join(state, "d")); err == nil || !strings.Contains(err.Error(), "every one of the 3 id slots") {
		t.Fatalf("a fourth claim on three slots: %v; want a refusal", err)
	}
	// Released, a slot is free again; and a slot whose session directory
	// is gone (a crash) is reclaimed.
	for b, id := range bases {
		if id == "a" {
			s.release(b, filepath.Join(state, "a"))
		}
	}
	if err := os.Remove(filepath.Join(state, "b")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"d", "e"} {
		var err error
		for range 2 { // the stale slot is cleared by one pass and taken by the next
			if _, err = s.claim(filepath.Join(state, id)); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("claim for %s after a release and a crash: %v", id, err)
		}
	}
	// A release names its session: another session's slot stays taken.
	for b, id := range bases {
		if id != "c" {
			continue
		}
		s.release(b, filepath.Join(state, "not-c"))
		slot := filepath.Join(s.dir, strconv.FormatUint(uint64((b-s.block.Base)/sessionIDs), 10))
		if got, err := os.ReadFile(slot); err != nil || string(got) != filepath.Join(state, "c") {
			t.Fatalf("releasing with another session's id freed c's slot: %q, %v", got, err)
		}
	}
}

// Clients with different state directories (a server and a CLI) draw on
// the host's one set of slots: a live session of one is never taken for
// stale by the other.
func TestSlotsAreSharedByClientsOfDifferentStateDirectories(t *testing.T) {
	slots := filepath.Join(t.TempDir(), "ids")
	s := idSlots{block: IDRange{Base: 500000000, Count: 2 * sessionIDs}, dir: slots}
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{filepath.Join(a, "s1"), filepath.Join(b, "s2")} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := s.claim(dir); err != nil {
			t.Fatalf("claim for %s: %v", dir, err)
		}
	}
	if _, err := s.claim(filepath.Join(b, "s3")); err == nil {
		t.Fatal("a third claim on two slots held by live sessions of two state directories succeeded")
	}
}
