package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestAgentboxLinksOnlyWhatDepsTxtLists keeps the program a shell-driven
// agent runs per command lean: every package it links runs its
// initialisers at every start, so a dependency added to it (an SDK, a
// schema compiler, a telemetry stack) costs every command. The list of
// what it links is checked in (deps.txt); a change to it is a decision,
// made in the commit that changes the list, with its cost measured
// (bench/native/run.sh, the exec-in-session row).
func TestAgentboxLinksOnlyWhatDepsTxtLists(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := strings.Fields(string(out))
	slices.Sort(got)
	b, err := os.ReadFile("deps.txt")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	var added, gone []string
	for _, p := range got {
		if !slices.Contains(want, p) {
			added = append(added, p)
		}
	}
	for _, p := range want {
		if !slices.Contains(got, p) {
			gone = append(gone, p)
		}
	}
	if len(added) > 0 {
		t.Errorf("agentbox now links packages deps.txt does not list:\n  %s\n"+
			"each one's initialisers run at every command; keep them in agentbox-full, or measure the cost and add them to deps.txt", strings.Join(added, "\n  "))
	}
	if len(gone) > 0 {
		t.Errorf("deps.txt lists packages agentbox no longer links (remove them):\n  %s", strings.Join(gone, "\n  "))
	}
}
