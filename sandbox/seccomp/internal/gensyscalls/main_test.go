package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheCheckedInTablesAreWhatTheGeneratorWrites keeps zsyscalls.go from
// being edited by hand or going stale when go.mod moves x/sys.
func TestTheCheckedInTablesAreWhatTheGeneratorWrites(t *testing.T) {
	dir, version, err := xsys()
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(dir, version)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../zsyscalls.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("sandbox/seccomp/zsyscalls.go is not what gensyscalls writes from golang.org/x/sys %s; run go generate ./sandbox/seccomp", version)
	}
}

func TestParseNamesCallsAsTheKernelAndSortsThemByName(t *testing.T) {
	var src strings.Builder
	src.WriteString("package unix\n\nconst (\n")
	for i := range 250 {
		fmt.Fprintf(&src, "\tSYS_CALL%03d = %d\n", 249-i, i)
	}
	src.WriteString("\tSYS__SYSCTL = 0x100\n)\n")
	path := filepath.Join(t.TempDir(), "zsysnum_linux_test.go")
	if err := os.WriteFile(path, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	calls, err := parse(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := calls[0], (call{"_sysctl", 0x100}); got != want {
		t.Errorf("first call %+v, want %+v", got, want)
	}
	if got, want := calls[len(calls)-1], (call{"call249", 0}); got != want {
		t.Errorf("last call %+v, want %+v", got, want)
	}
}

func TestParseRefusesAFileThatIsNotASyscallTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zsysnum_linux_test.go")
	if err := os.WriteFile(path, []byte("package unix\n\nconst SYS_READ = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parse(path); err == nil {
		t.Error("parse accepted a file with one system call")
	}
}
