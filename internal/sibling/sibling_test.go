package sibling

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain lets a copy of this test binary stand in for a sibling
// program: run with SIBLING_TEST=1, it prints its arguments.
func TestMain(m *testing.M) {
	if os.Getenv("SIBLING_TEST") == "1" {
		fmt.Println("sibling: " + strings.Join(os.Args[1:], " "))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const name = "agentbox-sibling"

func TestOpenInRunsOnlyAFileNoOneElseCouldHavePutThere(t *testing.T) {
	elf := []byte("\x7fELF\x02\x01\x01") // all check reads of a program
	owner := uint32(os.Getuid())
	// chown moves a file or directory to someone who is neither root nor
	// the test's owner; only root can.
	chown := func(t *testing.T, p string) {
		t.Helper()
		if os.Getuid() != 0 {
			t.Skip("giving a file away needs root")
		}
		if err := os.Lchown(p, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	write := func(t *testing.T, p string, data []byte, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setUp func(t *testing.T, dir, prog string)
		want  string // in the refusal; "" for a file OpenIn opens
	}{
		{"a program of the owner in the owner's private directory is run", func(t *testing.T, dir, prog string) {
			write(t, prog, elf, 0o755)
		}, ""},
		{"one in a sticky world-writable directory is run", func(t *testing.T, dir, prog string) {
			write(t, prog, elf, 0o755)
			if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a symbolic link to a program is refused", func(t *testing.T, dir, prog string) {
			target := filepath.Join(t.TempDir(), name)
			write(t, target, elf, 0o755)
			if err := os.Symlink(target, prog); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"a group-writable program is refused", func(t *testing.T, dir, prog string) {
			write(t, prog, elf, 0o775)
		}, "it is writable by group or others (-rwxrwxr-x)"},
		{"an other-writable program is refused", func(t *testing.T, dir, prog string) {
			write(t, prog, elf, 0o757)
		}, "it is writable by group or others"},
		{"a program in a group-writable directory is refused", func(t *testing.T, dir, prog string) {
			write(t, prog, elf, 0o755)
			if err := os.Chmod(dir, 0o770); err != nil {
				t.Fatal(err)
			}
		}, "its directory is writable by group or others (drwxrwx---) and not sticky"},
		{"a program someone else owns is refused", func(t *testing.T, dir, prog string) {
			write(t, prog, elf, 0o755)
			chown(t, prog)
		}, "owned by uid 4242"},
		{"a program in a directory someone else owns is refused", func(t *testing.T, dir, prog string) {
			write(t, prog, elf, 0o755)
			chown(t, dir)
		}, "its directory is owned by uid 4242"},
		{"a file that is not executable is refused", func(t *testing.T, dir, prog string) {
			write(t, prog, elf, 0o644)
		}, "is not an executable file"},
		{"a directory is refused", func(t *testing.T, dir, prog string) {
			if err := os.Mkdir(prog, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is not an executable file"},
		{"a script is refused", func(t *testing.T, dir, prog string) {
			write(t, prog, []byte("#!/bin/sh\n"), 0o755)
		}, "not an ELF executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			prog := filepath.Join(dir, name)
			tt.setUp(t, dir, prog)
			p, err := OpenIn(dir, name, owner)
			if tt.want != "" {
				if err == nil {
					p.Close()
					t.Fatalf("OpenIn ran %s; want a refusal with %q", prog, tt.want)
				}
				if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), prog) {
					t.Fatalf("OpenIn: %v; want a refusal naming %s with %q", err, prog, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenIn: %v", err)
			}
			defer p.Close()
			// The descriptor is of the file checked, and close-on-exec.
			var got, want unix.Stat_t
			if err := unix.Fstat(int(p.f.Fd()), &got); err != nil {
				t.Fatal(err)
			}
			if err := unix.Stat(prog, &want); err != nil {
				t.Fatal(err)
			}
			if got.Dev != want.Dev || got.Ino != want.Ino {
				t.Errorf("OpenIn opened inode %d, want %s (%d)", got.Ino, prog, want.Ino)
			}
			if fl, err := unix.FcntlInt(p.f.Fd(), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
				t.Errorf("the descriptor's flags %#x, %v; want close-on-exec", fl, err)
			}
		})
	}
	if _, err := OpenIn(t.TempDir(), name, owner); !errors.Is(err, os.ErrNotExist) || !IsMissing(err) {
		t.Errorf("OpenIn of an empty directory: %v; want not exist", err)
	}
}

func TestAFileRenamedOverTheProgramAfterTheCheckIsNotRun(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, name)
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := OpenIn(dir, name, uint32(os.Getuid()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The swap a path-based exec would run.
	swap := filepath.Join(dir, "swap")
	if err := os.WriteFile(swap, []byte("#!/bin/sh\necho swapped\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(swap, prog); err != nil {
		t.Fatal(err)
	}
	// The exec of Path happens before the close-on-exec descriptor is
	// closed: the checked program runs.
	cmd := exec.Command(p.Path(), "x")
	cmd.Args[0] = prog
	cmd.Env = append(os.Environ(), "SIBLING_TEST=1")
	out, err := cmd.CombinedOutput()
	if string(out) != "sibling: x\n" || err != nil {
		t.Errorf("exec of the checked descriptor after a swap: %q, %v; want the checked program's \"sibling: x\\n\"", out, err)
	}
}
