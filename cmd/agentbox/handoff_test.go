package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestMain lets a copy of this test binary named agentbox-full (standIn)
// stand in for the full program: run as the lean build hands off, it
// prints how it was called. It is an ELF file because the hand-off runs
// no script (see execFull).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == fullName && os.Getenv(handedOffEnv) == "1" {
		fmt.Println("full: " + strings.Join(os.Args[1:], " "))
		os.Exit(0)
	}
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// build builds this package with the given tags ("lean,noegress", as
// scripts/build.sh builds agentbox, or "" for agentbox-full) into a fresh
// directory and returns the program's path.
func build(t *testing.T, tags, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-tags", tags, "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -tags %q: %v\n%s", tags, err, out)
	}
	return bin
}

// buildLean builds the lean agentbox.
func buildLean(t *testing.T) string { return build(t, "lean,noegress", "agentbox") }

// copyFile copies src to dst with the given mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// standIn puts a copy of this test binary at dir/agentbox-full (see
// TestMain) and returns its path.
func standIn(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, fullName)
	copyFile(t, self, full, 0o755)
	return full
}

// commandList returns the "Available Commands" lines of a root help text.
func commandList(help string) []string {
	_, after, _ := strings.Cut(help, "Available Commands:\n")
	block, _, _ := strings.Cut(after, "\n\n")
	var lines []string
	for l := range strings.SplitSeq(block, "\n") {
		lines = append(lines, regexp.MustCompile(`\s+`).ReplaceAllString(strings.TrimSpace(l), " "))
	}
	return lines
}

// run runs bin with args and returns its stdout, stderr and exit status.
func run(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run %s: %v", bin, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

func TestLeanBuildListsTheSameCommandsAsTheFullOne(t *testing.T) {
	// This test binary is one build (lean with -tags lean); the other is
	// built and run.
	lean := handOff != nil
	other := map[bool]string{false: "lean", true: "full"}[lean]
	var bin string
	if lean {
		bin = build(t, "", fullName)
	} else {
		bin = buildLean(t)
	}
	otherHelp, _, code := run(t, bin, "--help")
	if code != 0 {
		t.Fatalf("%s --help exited %d", other, code)
	}
	root := newRootCmd()
	var help bytes.Buffer
	root.SetOut(&help)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got, want := commandList(otherHelp), commandList(help.String())
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s root help lists\n%s\nthis build's\n%s", other, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, b := range fullOnlyBackends {
		switch _, ok := backends[b]; {
		case lean && ok:
			t.Errorf("fullOnlyBackends names %q, which the lean build registers", b)
		case !lean && !ok:
			t.Errorf("fullOnlyBackends names %q, which the full build does not register", b)
		}
	}
}

func TestLeanBuildHandsOffToTheFullProgramBesideIt(t *testing.T) {
	lean := buildLean(t)
	dir := filepath.Dir(lean)
	full := standIn(t, dir)
	tests := [][]string{
		{"run", "--agent", "a.yaml", "count the rows"},
		{"run", "--help"},
		{"help", "image"},
		{"image", "build", "--force"},
		{"promote", "--from", "ws", "--rules", "r.yaml", "--to", "out"},
		{"exec", "--backend", "docker", "--", "echo", "hi"},
		// What the plain exec does not link: the workspace contract and
		// the egress proxy.
		{"exec", "--manifest", "m.yaml", "--", "true"},
		{"exec", "--snapshot", "0123456789ab", "--", "true"},
		{"exec", "--save-snapshot", "--", "true"},
		{"exec", "--network", "pypi.org", "--", "true"},
		{"snapshot", "ls"},
		// Shell completion of what only the full program knows.
		{"__complete", "snapshot", ""},
		{"__completeNoDesc", "run", "--ag"},
	}
	for _, args := range tests {
		stdout, stderr, code := run(t, lean, args...)
		if want := "full: " + strings.Join(args, " ") + "\n"; stdout != want || code != 0 {
			t.Errorf("lean %q: stdout %q, exit %d (stderr %q), want %q, exit 0", args, stdout, code, stderr, want)
		}
	}
	// The completion script is cobra's own, in both builds.
	stdout, stderr, code := run(t, lean, "completion", "bash")
	if code != 0 || !strings.Contains(stdout, "__start_agentbox") {
		t.Errorf("lean completion bash: exit %d, stderr %q, stdout %.80q; want a bash completion script", code, stderr, stdout)
	}

	// What the hand-off refuses, each with one line that says why.
	refused := func(what, want string) {
		t.Helper()
		_, stderr, code := run(t, lean, "run", "--help")
		if code != exitCode || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want 125 and one line with %q", what, code, stderr, want)
		}
	}
	if err := os.Chmod(full, 0o775); err != nil {
		t.Fatal(err)
	}
	refused("group-writable agentbox-full", "writable by group or others")
	if err := os.Chmod(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	refused("agentbox-full in a group-writable directory", "its directory is writable by group or others")
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := standIn(t, t.TempDir())
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		t.Fatal(err)
	}
	refused("symbolic link agentbox-full", "is a symbolic link")
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte("#!/bin/sh\necho \"full: $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	refused("script agentbox-full", "not an ELF executable")
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"run", "x"}, {"exec", "--backend", "docker", "--", "true"}} {
		_, stderr, code := run(t, lean, args...)
		if code != exitCode || !strings.Contains(stderr, "agentbox-full is not beside it") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("lean %q without agentbox-full: exit %d, stderr %q; want 125 and one line naming agentbox-full", args, code, stderr)
		}
	}
	// An agentbox-full that is a lean build itself is refused, not run
	// in a loop.
	copyFile(t, lean, full, 0o755)
	refused("lean agentbox-full", "is a lean agentbox too")
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	// A backend neither build has is refused as unknown, not handed off.
	_, stderr, code = run(t, lean, "exec", "--backend", "vmware", "--", "true")
	if code != exitCode || !strings.Contains(stderr, "unknown backend") {
		t.Errorf("lean exec --backend vmware: exit %d, stderr %q; want 125, unknown backend", code, stderr)
	}
}

func TestLeanBuildRunsExecItself(t *testing.T) {
	testenv.NeedRoot(t, "the native sandbox")
	lean := buildLean(t)
	stdout, stderr, code := run(t, lean, "exec", "--", "sh", "-c", "echo in; exit 3")
	if stdout != "in\n" || code != 3 {
		t.Errorf("lean exec: stdout %q, exit %d (stderr %q); want \"in\\n\", 3", stdout, code, stderr)
	}
}

func TestOpenFullRunsOnlyAFileNoOneElseCouldHavePutThere(t *testing.T) {
	elf := []byte("\x7fELF\x02\x01\x01") // all openFull reads of a program
	owner := uint32(os.Getuid())
	// chown moves a file or directory to someone who is neither root nor
	// the test's owner; only root can.
	chown := func(t *testing.T, p string) {
		t.Helper()
		testenv.NeedRoot(t, "giving a file away")
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
		setUp func(t *testing.T, dir, full string)
		want  string // in the refusal; "" for a file openFull opens
	}{
		{"a program of the owner in the owner's private directory is run", func(t *testing.T, dir, full string) {
			write(t, full, elf, 0o755)
		}, ""},
		{"one in a sticky world-writable directory is run", func(t *testing.T, dir, full string) {
			write(t, full, elf, 0o755)
			if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a symbolic link to a program is refused", func(t *testing.T, dir, full string) {
			target := filepath.Join(t.TempDir(), fullName)
			write(t, target, elf, 0o755)
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"a group-writable program is refused", func(t *testing.T, dir, full string) {
			write(t, full, elf, 0o775)
		}, "it is writable by group or others (-rwxrwxr-x)"},
		{"an other-writable program is refused", func(t *testing.T, dir, full string) {
			write(t, full, elf, 0o757)
		}, "it is writable by group or others"},
		{"a program in a group-writable directory is refused", func(t *testing.T, dir, full string) {
			write(t, full, elf, 0o755)
			if err := os.Chmod(dir, 0o770); err != nil {
				t.Fatal(err)
			}
		}, "its directory is writable by group or others (drwxrwx---) and not sticky"},
		{"a program someone else owns is refused", func(t *testing.T, dir, full string) {
			write(t, full, elf, 0o755)
			chown(t, full)
		}, "owned by uid 4242"},
		{"a program in a directory someone else owns is refused", func(t *testing.T, dir, full string) {
			write(t, full, elf, 0o755)
			chown(t, dir)
		}, "its directory is owned by uid 4242"},
		{"a file that is not executable is refused", func(t *testing.T, dir, full string) {
			write(t, full, elf, 0o644)
		}, "is not an executable file"},
		{"a directory is refused", func(t *testing.T, dir, full string) {
			if err := os.Mkdir(full, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is not an executable file"},
		{"a script is refused", func(t *testing.T, dir, full string) {
			write(t, full, []byte("#!/bin/sh\n"), 0o755)
		}, "not an ELF executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			full := filepath.Join(dir, fullName)
			tt.setUp(t, dir, full)
			fd, err := openFull(dir, owner)
			if tt.want != "" {
				if err == nil {
					unix.Close(fd)
					t.Fatalf("openFull ran %s; want a refusal with %q", full, tt.want)
				}
				if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), full) {
					t.Fatalf("openFull: %v; want a refusal naming %s with %q", err, full, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("openFull: %v", err)
			}
			defer unix.Close(fd)
			// The descriptor is of the file checked.
			var got, want unix.Stat_t
			if err := unix.Fstat(fd, &got); err != nil {
				t.Fatal(err)
			}
			if err := unix.Stat(full, &want); err != nil {
				t.Fatal(err)
			}
			if got.Dev != want.Dev || got.Ino != want.Ino {
				t.Errorf("openFull opened inode %d, want %s (%d)", got.Ino, full, want.Ino)
			}
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
				t.Errorf("openFull's descriptor: flags %#x, %v; want close-on-exec", fl, err)
			}
		})
	}

	// Without the file, the error says so (findFull turns it into the
	// advice to build both).
	if _, err := openFull(t.TempDir(), owner); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("openFull of an empty directory: %v; want not exist", err)
	}
}

func TestAFileRenamedOverAgentboxFullAfterTheCheckIsNotRun(t *testing.T) {
	dir := t.TempDir()
	full := standIn(t, dir)
	fd, err := openFull(dir, uint32(os.Getuid()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// The swap a path-based exec would run.
	swap := filepath.Join(dir, "swap")
	if err := os.WriteFile(swap, []byte("#!/bin/sh\necho swapped\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(swap, full); err != nil {
		t.Fatal(err)
	}
	// What execFull runs, in a child: the exec of fdPath(fd) happens
	// before the close-on-exec descriptor is closed.
	cmd := exec.Command(fdPath(fd), "x")
	cmd.Args[0] = full
	cmd.Env = append(os.Environ(), handedOffEnv+"=1")
	out, err := cmd.CombinedOutput()
	if string(out) != "full: x\n" || err != nil {
		t.Errorf("exec of the checked descriptor after a swap: %q, %v; want the checked program's \"full: x\\n\"", out, err)
	}
}
