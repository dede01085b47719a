package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// forwardedEnv is what agentbox sets for the agentbox-full it forwards to
// (cli's forwardedEnv).
const forwardedEnv = "AGENTBOX_FORWARDED"

// TestMain lets a copy of this test binary named agentbox-full (standIn)
// stand in for the full program: run as agentbox forwards, it prints how
// it was called. It is an ELF file because the forward runs no script.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "agentbox-full" && os.Getenv(forwardedEnv) == "1" {
		fmt.Println("full: " + strings.Join(os.Args[1:], " "))
		os.Exit(0)
	}
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

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

// lone copies the built agentbox alone into a fresh private directory
// and returns its path.
func lone(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "agentbox")
	copyFile(t, agentboxBinary(t), p, 0o755)
	return p
}

// standIn puts a copy of this test binary at dir/agentbox-full (see
// TestMain) and returns its path.
func standIn(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "agentbox-full")
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

func TestBothProgramsListTheSameCommands(t *testing.T) {
	bin := agentboxBinary(t)
	lean, _, code := run(t, bin, "--help")
	if code != 0 {
		t.Fatalf("agentbox --help exited %d", code)
	}
	full, _, code := run(t, filepath.Join(filepath.Dir(bin), "agentbox-full"), "--help")
	if code != 0 {
		t.Fatalf("agentbox-full --help exited %d", code)
	}
	if got, want := commandList(lean), commandList(full); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("agentbox lists\n%s\nagentbox-full lists\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAgentboxForwardsToTheFullProgramBesideIt(t *testing.T) {
	lean := lone(t)
	dir := filepath.Dir(lean)
	full := standIn(t, dir)
	tests := [][]string{
		{"run", "--agent", "a.yaml", "count the rows"},
		{"run", "--help"},
		{"help", "image"},
		{"image", "build", "--force"},
		{"promote", "--from", "ws", "--rules", "r.yaml", "--to", "out"},
		{"gc", "--dry-run"},
		{"backends"},
		{"exec", "--backend", "docker", "--", "echo", "hi"},
		{"session", "create", "--backend", "docker"},
		// Shell completion of what only the full program knows.
		{"__complete", "run", ""},
		{"__completeNoDesc", "run", "--ag"},
	}
	for _, args := range tests {
		stdout, stderr, code := run(t, lean, args...)
		if want := "full: " + strings.Join(args, " ") + "\n"; stdout != want || code != 0 {
			t.Errorf("agentbox %q: stdout %q, exit %d (stderr %q), want %q, exit 0", args, stdout, code, stderr, want)
		}
	}
	// The completion script is cobra's own, in both programs.
	stdout, stderr, code := run(t, lean, "completion", "bash")
	if code != 0 || !strings.Contains(stdout, "__start_agentbox") {
		t.Errorf("agentbox completion bash: exit %d, stderr %q, stdout %.80q; want a bash completion script", code, stderr, stdout)
	}

	// What the forward refuses, each with one line that says why (the
	// rule itself is package sibling's, tested there).
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
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run", "x"}, {"exec", "--backend", "docker", "--", "true"}} {
		_, stderr, code := run(t, lean, args...)
		if code != exitCode || !strings.Contains(stderr, "agentbox-full, which is not beside this agentbox") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("agentbox %q without agentbox-full: exit %d, stderr %q; want 125 and one line naming agentbox-full", args, code, stderr)
		}
	}
	// An agentbox-full that is a copy of agentbox is refused, not run in
	// a loop.
	copyFile(t, lean, full, 0o755)
	refused("agentbox as agentbox-full", "forwarded again")
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	// A backend neither program has is refused as unknown, with the
	// nearest name when it is a typo.
	_, stderr, code = run(t, lean, "exec", "--backend", "dokcer", "--", "true")
	if code != exitCode || !strings.Contains(stderr, `unknown backend "dokcer": did you mean "docker"?`) {
		t.Errorf("agentbox exec --backend dokcer: exit %d, stderr %q; want 125 and the nearest name", code, stderr)
	}
}
