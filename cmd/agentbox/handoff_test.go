package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildLean builds the lean agentbox (go build -tags lean,noegress, as
// scripts/build.sh does) into a fresh directory and returns its path.
func buildLean(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentbox")
	out, err := exec.Command("go", "build", "-tags", "lean,noegress", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -tags lean: %v\n%s", err, out)
	}
	return bin
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
	lean := buildLean(t)
	leanHelp, _, code := run(t, lean, "--help")
	if code != 0 {
		t.Fatalf("lean --help exited %d", code)
	}
	root := newRootCmd()
	var full bytes.Buffer
	root.SetOut(&full)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got, want := commandList(leanHelp), commandList(full.String())
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lean root help lists\n%s\nthe full one\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, b := range fullOnlyBackends {
		if _, ok := backends[b]; !ok {
			t.Errorf("fullOnlyBackends names %q, which the full build does not register", b)
		}
	}
}

func TestLeanBuildHandsOffToTheFullProgramBesideIt(t *testing.T) {
	lean := buildLean(t)
	// A stand-in for agentbox-full that shows how it was called.
	full := filepath.Join(filepath.Dir(lean), fullName)
	if err := os.WriteFile(full, []byte("#!/bin/sh\necho \"full: $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
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
	}
	for _, args := range tests {
		stdout, stderr, code := run(t, lean, args...)
		if want := "full: " + strings.Join(args, " ") + "\n"; stdout != want || code != 0 {
			t.Errorf("lean %q: stdout %q, exit %d (stderr %q), want %q, exit 0", args, stdout, code, stderr, want)
		}
	}

	if err := os.Chmod(full, 0o775); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, lean, "run", "--help")
	if code != exitCode || !strings.Contains(stderr, "writable by group or others") {
		t.Errorf("group-writable agentbox-full: exit %d, stderr %q; want 125 and a refusal", code, stderr)
	}

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
	if err := os.Symlink(lean, full); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = run(t, lean, "run", "--help")
	if code != exitCode || !strings.Contains(stderr, "is a lean agentbox too") {
		t.Errorf("lean agentbox-full: exit %d, stderr %q; want 125 and a refusal", code, stderr)
	}
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
	if os.Getuid() != 0 {
		t.Skip("the native sandbox tests need root")
	}
	lean := buildLean(t)
	stdout, stderr, code := run(t, lean, "exec", "--", "sh", "-c", "echo in; exit 3")
	if stdout != "in\n" || code != 3 {
		t.Errorf("lean exec: stdout %q, exit %d (stderr %q); want \"in\\n\", 3", stdout, code, stderr)
	}
}
