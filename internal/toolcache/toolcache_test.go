package toolcache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestApplyMountsEachCacheOutsideTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	spec := sandbox.Spec{Env: map[string]string{"PIP_CACHE_DIR": "/tmp/mine"}}
	if err := Apply(&spec, dir, []string{"go", "pip", "go"}); err != nil {
		t.Fatal(err)
	}
	want := []sandbox.Mount{
		{Source: filepath.Join(dir, "go"), Target: "/mnt/cache/go"},
		{Source: filepath.Join(dir, "pip"), Target: "/mnt/cache/pip"},
	}
	if len(spec.Mounts) != len(want) || spec.Mounts[0] != want[0] || spec.Mounts[1] != want[1] {
		t.Fatalf("mounts %+v, want %+v (read-write, once each)", spec.Mounts, want)
	}
	for _, m := range spec.Mounts {
		if strings.HasPrefix(m.Target, sandbox.DefaultWorkdir+"/") {
			t.Errorf("%s is in the workspace, so snapshots and promotion would take it", m.Target)
		}
		if err := sandbox.ValidateMountTarget("", m.Target); err != nil {
			t.Errorf("%s: %v", m.Target, err)
		}
		if fi, err := os.Stat(m.Source); err != nil || !fi.IsDir() {
			t.Errorf("host directory %s not made: %v", m.Source, err)
		}
	}
	if spec.Env["GOCACHE"] != "/mnt/cache/go/build" || spec.Env["GOMODCACHE"] != "/mnt/cache/go/mod" {
		t.Errorf("go's variables: %v", spec.Env)
	}
	if spec.Env["PIP_CACHE_DIR"] != "/tmp/mine" {
		t.Errorf("a variable the caller set was replaced: %v", spec.Env)
	}
}

func TestApplyRefusesAnUnknownCacheAndSuggests(t *testing.T) {
	err := Apply(&sandbox.Spec{}, t.TempDir(), []string{"pipp"})
	if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), `unknown cache "pipp": did you mean "pip"? (known: go, npm, pip)`) {
		t.Fatalf("error %v", err)
	}
}
