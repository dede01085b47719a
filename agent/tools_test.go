package agent

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbox/agentbox/agent/model"
)

func TestTruncateKeepsHeadAndTail(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		cut  bool
	}{
		{"short output is untouched", "hello", 100, false},
		{"long output keeps both ends and says how much was cut", "HEAD" + strings.Repeat("x", 10000) + "TAIL", 200, true},
		{"multi-byte characters are not split", strings.Repeat("é", 5000), 101, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := Truncate(tt.in, tt.max)
			if cut != tt.cut {
				t.Fatalf("cut=%v, want %v", cut, tt.cut)
			}
			if !cut {
				if got != tt.in {
					t.Fatalf("changed: %q", got)
				}
				return
			}
			if len(got) > tt.max+10 {
				t.Errorf("%d bytes, want about %d", len(got), tt.max)
			}
			if !strings.Contains(got, "…[truncated ") {
				t.Errorf("no marker: %q", got)
			}
			if !strings.HasPrefix(got, tt.in[:2]) || !strings.HasSuffix(got, tt.in[len(tt.in)-2:]) {
				t.Errorf("head or tail lost: %q", got)
			}
			var n int
			if _, err := fmt.Sscanf(got[strings.Index(got, "…[truncated ")+len("…[truncated "):], "%d", &n); err != nil {
				t.Fatal(err)
			}
			kept := len(got) - len(fmt.Sprintf("\n…[truncated %d bytes]…\n", n))
			if kept+n != len(tt.in) {
				t.Errorf("kept %d + cut %d != %d", kept, n, len(tt.in))
			}
			if !utf8.ValidString(got) {
				t.Error("invalid UTF-8")
			}
		})
	}
}

func TestCompactionReplacesOldOutputs(t *testing.T) {
	big := strings.Repeat("o", 1000)
	var items []model.Item
	for i := range 6 {
		id := fmt.Sprintf("c%d", i)
		items = append(items,
			model.Item{Type: model.ItemFunctionCall, CallID: id, Name: "exec_command"},
			model.Item{Type: model.ItemFunctionCallOutput, CallID: id, Output: big})
	}
	tests := []struct {
		name      string
		c         Compaction
		compacted int
	}{
		{"under the budget nothing changes", Compaction{MaxBytes: 10000}, 0},
		{"over the budget the oldest outputs go first", Compaction{MaxBytes: 3500, KeepLast: 2}, 3},
		{"the latest outputs are kept even over the budget", Compaction{MaxBytes: 10, KeepLast: 2}, 4},
		{"a token budget counts four bytes a token", Compaction{MaxTokens: 1100, KeepLast: 1}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.c.FilterInput(items)
			n := 0
			for i, it := range out {
				if it.Type != model.ItemFunctionCallOutput {
					continue
				}
				if strings.HasPrefix(it.Output, "[compacted: 1000 bytes of output from exec_command]") {
					n++
					if later := out[i+1:]; len(later) > 0 && n > 0 {
						// compaction is oldest-first: nothing before i is intact
						for _, prev := range out[:i] {
							if prev.Type == model.ItemFunctionCallOutput && prev.Output == big {
								t.Fatalf("an older output survived while a newer one was compacted")
							}
						}
					}
				}
			}
			if n != tt.compacted {
				t.Fatalf("compacted %d outputs, want %d", n, tt.compacted)
			}
			if items[1].Output != big {
				t.Fatal("FilterInput modified its input")
			}
		})
	}
}

func TestViewImageDetectsTypeByContent(t *testing.T) {
	sess := liveSession(t)
	ws := sess.State().Workspace
	files := map[string][]byte{
		"pic.dat":   append([]byte("\x89PNG\r\n\x1a\n"), 1, 2, 3),
		"photo.txt": {0xFF, 0xD8, 0xFF, 0xE0, 0},
		"anim":      []byte("GIF89a...."),
		"w.png":     []byte("RIFF\x10\x00\x00\x00WEBPVP8 "),
		"fake.png":  []byte("not an image at all"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tool := (&Filesystem{}).Tools(sess)[4]
	tests := []struct {
		name, path, want string
	}{
		{"a PNG with a misleading name is a PNG", "pic.dat", "data:image/png;base64," + base64.StdEncoding.EncodeToString(files["pic.dat"])},
		{"a JPEG is a JPEG", "photo.txt", "data:image/jpeg;base64,"},
		{"a GIF is a GIF", "anim", "data:image/gif;base64,"},
		{"a WebP is a WebP", "w.png", "data:image/webp;base64,"},
		{"a text file named .png is refused", "fake.png", "error:not a PNG, JPEG, GIF or WebP image"},
		{"a missing file is an error", "nope.png", "error:view_image nope.png"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tool.Call(context.Background(), []byte(fmt.Sprintf(`{"path": %q}`, tt.path)))
			if want, isErr := strings.CutPrefix(tt.want, "error:"); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out, tt.want) {
				t.Fatalf("got %.60q, want prefix %q", out, tt.want)
			}
		})
	}
}

func TestReadFileAndListDir(t *testing.T) {
	sess := liveSession(t)
	ws := sess.State().Workspace
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	_ = os.WriteFile(filepath.Join(ws, "ten.txt"), []byte(b.String()), 0o644)
	_ = os.WriteFile(filepath.Join(ws, "bin"), []byte{0, 1, 2}, 0o644)
	_ = os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	tools := (&Filesystem{}).Tools(sess)
	read, list := tools[1], tools[3]
	tests := []struct {
		name string
		tool Tool
		args string
		want string
	}{
		{"a whole file is returned as is", read, `{"path": "ten.txt"}`, "line 1\nline 2\n"},
		{"a line range says where it is", read, `{"path": "ten.txt", "offset": 9, "limit": 5}`, "[lines 9-10 of 10]\nline 9\nline 10\n"},
		{"an offset past the end is an error", read, `{"path": "ten.txt", "offset": 50}`, "error:past the end"},
		{"a binary file is refused", read, `{"path": "bin"}`, "error:binary file"},
		{"a path out of the workspace is refused", read, `{"path": "../../etc/passwd"}`, "error:leaves the workspace"},
		{"a listing shows dirs and sizes", list, `{}`, "bin\t3 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.tool.Call(context.Background(), []byte(tt.args))
			if want, isErr := strings.CutPrefix(tt.want, "error:"); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tt.want) {
				t.Fatalf("got %q, want %q", out, tt.want)
			}
		})
	}
}

func TestSkillsAreIndexedAndLoaded(t *testing.T) {
	dir := t.TempDir()
	mk := func(p, content string) {
		t.Helper()
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("csv/SKILL.md", "---\nname: csv-tools\ndescription: Reconcile CSV files with awk\n---\n# CSV\nUse awk.\n")
	mk("csv/scripts/sum.awk", "{s+=$2} END {print s}\n")
	mk("notaskill/README", "x")
	s := &Skills{Dir: dir}
	if ins := s.Instructions(); !strings.Contains(ins, "- csv-tools: Reconcile CSV files with awk") {
		t.Fatalf("index not in the instructions: %q", ins)
	}
	sess := liveSession(t)
	tool := s.Tools(sess)[0]
	out, err := tool.Call(context.Background(), []byte(`{"name": "csv-tools"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Use awk.") {
		t.Errorf("SKILL.md not returned: %q", out)
	}
	b, err := os.ReadFile(filepath.Join(sess.State().Workspace, ".skills/csv-tools/scripts/sum.awk"))
	if err != nil || !strings.Contains(string(b), "END") {
		t.Errorf("bundle not copied: %v", err)
	}
	if _, err := tool.Call(context.Background(), []byte(`{"name": "nope"}`)); err == nil || !strings.Contains(err.Error(), "available: csv-tools") {
		t.Errorf("unknown skill error: %v", err)
	}
	mk("bad/SKILL.md", "no front matter\n")
	if _, err := (&Skills{Dir: dir}).Index(); err == nil || !strings.Contains(err.Error(), "no front matter") {
		t.Errorf("bad bundle error: %v", err)
	}
}
