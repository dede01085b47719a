package manifest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/manifest"
)

func Example() {
	base, _ := os.MkdirTemp("", "proj")
	defer os.RemoveAll(base)
	_ = os.WriteFile(filepath.Join(base, "ledger.csv"), []byte("date,amount\n"), 0o644)

	m, err := manifest.ParseYAML([]byte(`
entries:
  README.md:
    file: {content: "Reconcile data/ledger.csv\n"}
  data/ledger.csv:
    local_file: {src: ledger.csv}
  out:
    dir: {}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ws, _ := os.MkdirTemp("", "ws")
	defer os.RemoveAll(ws)
	if _, err := m.Materialize(context.Background(), ws, manifest.MaterializeOptions{Base: base, Trusted: true, UID: -1, GID: -1}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(manifest.Render(ws, manifest.RenderOptions{}))
	// Output:
	// /workspace/
	//   README.md  (26 B)
	//   data/
	//     ledger.csv  (12 B)
	//   out/
}
