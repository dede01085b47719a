package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSamplerKeepsThePeakOfTheSummedGroups(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m := &memSampler{stop: make(chan struct{}), done: make(chan struct{})}
	m.add(write("a", "100"))
	m.add(write("b", "50"))
	m.sample()
	write("a", "10")
	os.Remove(filepath.Join(dir, "b")) // a closed session's group is gone
	m.sample()
	if m.peakGroups != 150 {
		t.Errorf("peak of the groups = %d, want 150", m.peakGroups)
	}
}

func TestReadBytesRejectsWhatIsNotANumber(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(p, []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readBytes(p); err == nil {
		t.Error("readBytes of \"max\": no error")
	}
}
