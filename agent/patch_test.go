package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestApplyHunks(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		patch   string
		want    string
		wantErr string
	}{
		{
			name:  "a single hunk replaces a line in context",
			file:  "a\nb\nc\n",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+B\n c\n*** End Patch",
			want:  "a\nB\nc\n",
		},
		{
			name:  "two hunks apply in order",
			file:  "one\ntwo\nthree\nfour\nfive\nsix\n",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n one\n-two\n+2\n@@\n five\n-six\n+6\n*** End Patch",
			want:  "one\n2\nthree\nfour\nfive\n6\n",
		},
		{
			name:  "an @@ anchor picks the right one of two identical contexts",
			file:  "def a():\n    return 1\ndef b():\n    return 1\n",
			patch: "*** Begin Patch\n*** Update File: f\n@@ def b():\n-    return 1\n+    return 2\n*** End Patch",
			want:  "def a():\n    return 1\ndef b():\n    return 2\n",
		},
		{
			name:  "the end-of-file marker pins a hunk to the last lines",
			file:  "x\nend\nx\nend\n",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n x\n-end\n+END\n*** End of File\n*** End Patch",
			want:  "x\nend\nx\nEND\n",
		},
		{
			name:  "a pure addition with the EOF marker appends",
			file:  "a\n",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n+b\n*** End of File\n*** End Patch",
			want:  "a\nb\n",
		},
		{
			name:  "CRLF files keep their line endings",
			file:  "a\r\nb\r\nc\r\n",
			patch: "*** Begin Patch\r\n*** Update File: f\r\n@@\r\n a\r\n-b\r\n+B\r\n*** End Patch\r\n",
			want:  "a\r\nB\r\nc\r\n",
		},
		{
			name:  "a file without a final newline keeps it that way",
			file:  "a\nb",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+c\n*** End Patch",
			want:  "a\nc",
		},
		{
			name:  "trailing whitespace differences still match",
			file:  "a  \nb\n",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+c\n*** End Patch",
			want:  "a  \nc\n",
		},
		{
			name:  "an empty context line whose space was stripped matches",
			file:  "a\n\nb\n",
			patch: "*** Begin Patch\n*** Update File: f\n@@\n a\n\n-b\n+c\n*** End Patch",
			want:  "a\n\nc\n",
		},
		{
			name:    "context that is not in the file is a clear error",
			file:    "a\nb\n",
			patch:   "*** Begin Patch\n*** Update File: f\n@@\n zzz\n-b\n+c\n*** End Patch",
			wantErr: "hunk 1 (patch line 3): context not found",
		},
		{
			name:    "an anchor that is not in the file is a clear error",
			file:    "a\nb\n",
			patch:   "*** Begin Patch\n*** Update File: f\n@@ class Missing\n-b\n+c\n*** End Patch",
			wantErr: `anchor "class Missing" not found`,
		},
		{
			name:    "hunks must be in file order",
			file:    "a\nb\nc\n",
			patch:   "*** Begin Patch\n*** Update File: f\n@@\n-c\n+C\n@@\n-a\n+A\n*** End Patch",
			wantErr: "hunk 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := ParsePatch(tt.patch)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got, err := ApplyHunks("f", tt.file, ops[0].Hunks)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParsePatchRejectsMalformedPatches(t *testing.T) {
	tests := []struct {
		name, patch, wantErr string
	}{
		{"a patch without Begin Patch", "*** Update File: f\n-a\n*** End Patch", "must start with"},
		{"a patch without End Patch", "*** Begin Patch\n*** Delete File: f", "must end with"},
		{"an added file line without a plus", "*** Begin Patch\n*** Add File: f\nhello\n*** End Patch", "must start with '+'"},
		{"a stray line between files", "*** Begin Patch\nhello\n*** End Patch", "expected a file header"},
		{"a hunk line with a bad prefix", "*** Begin Patch\n*** Update File: f\n@@\n*bad\n*** End Patch", "patch line 4"},
		{"an update without hunks", "*** Begin Patch\n*** Update File: f\n*** End Patch", "has no hunk"},
		{"an empty patch", "*** Begin Patch\n*** End Patch", "no file operation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePatch(tt.patch)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestApplyPatchToolChangesTheWorkspace(t *testing.T) {
	sess := liveSession(t)
	ws := sess.State().Workspace
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("keep.sh", "#!/bin/sh\necho old\n")
	write("gone.txt", "bye\n")
	write("move.txt", "m1\nm2\n")
	tool := (&Filesystem{}).Tools(sess)[0]
	patch := `*** Begin Patch
*** Add File: new/dir/hello.txt
+hello
+world
*** Update File: keep.sh
@@
 #!/bin/sh
-echo old
+echo new
*** Delete File: gone.txt
*** Update File: move.txt
*** Move to: moved/here.txt
@@
 m1
-m2
+M2
*** End Patch`
	args, _ := json.Marshal(map[string]string{"input": patch})
	out, err := tool.Call(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"A new/dir/hello.txt", "M keep.sh", "D gone.txt", "M moved/here.txt"} {
		if !strings.Contains(out, w) {
			t.Errorf("summary %q lacks %q", out, w)
		}
	}
	check := func(name, want string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
	}
	check("new/dir/hello.txt", "hello\nworld\n")
	check("keep.sh", "#!/bin/sh\necho new\n")
	check("moved/here.txt", "m1\nM2\n")
	for _, gone := range []string{"gone.txt", "move.txt"} {
		if _, err := os.Stat(filepath.Join(ws, gone)); !os.IsNotExist(err) {
			t.Errorf("%s still exists (%v)", gone, err)
		}
	}
	if st, err := os.Stat(filepath.Join(ws, "keep.sh")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("keep.sh lost its mode: %v %v", st.Mode(), err)
	}
}

func TestApplyPatchIsAllOrNothing(t *testing.T) {
	sess := liveSession(t)
	ws := sess.State().Workspace
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := (&Filesystem{}).Tools(sess)[0]
	patch := "*** Begin Patch\n*** Add File: b.txt\n+b\n*** Update File: a.txt\n@@\n-not there\n+x\n*** End Patch"
	args, _ := json.Marshal(map[string]string{"input": patch})
	_, err := tool.Call(context.Background(), args)
	if err == nil || !strings.Contains(err.Error(), "context not found") {
		t.Fatalf("error %v, want context not found", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); !os.IsNotExist(err) {
		t.Error("b.txt was added although the patch failed")
	}
}

func TestApplyPatchSaysWhatAFailedWriteLeft(t *testing.T) {
	tests := []struct {
		name  string
		patch string
		want  string
	}{
		{"a first write that fails changed nothing",
			"*** Begin Patch\n*** Add File: file/x\n+x\n*** End Patch",
			"write /workspace/file/x: "},
		{"a later write that fails names what was applied",
			"*** Begin Patch\n*** Add File: ok.txt\n+ok\n*** Add File: file/x\n+x\n*** End Patch",
			"; already applied, and kept: A ok.txt; the rest of the patch was not applied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sess := liveSession(t)
			ws := sess.State().Workspace
			// "file" is a regular file, so nothing can be written under it.
			if err := os.WriteFile(filepath.Join(ws, "file"), []byte("f\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args, _ := json.Marshal(map[string]string{"input": tt.patch})
			_, err := (&Filesystem{}).Tools(sess)[0].Call(context.Background(), args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "after no change") || strings.Contains(err.Error(), ws) {
				t.Fatalf("error %v: a riddle or a host path", err)
			}
			if strings.HasPrefix(tt.name, "a first") && !strings.HasSuffix(err.Error(), "; nothing was changed") {
				t.Fatalf("error %v does not say nothing was changed", err)
			}
		})
	}
}
