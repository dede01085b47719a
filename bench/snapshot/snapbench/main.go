// Command snapbench saves and restores with the snapshot package directly,
// like `agentbox snapshot save|restore`. run.sh uses it only when the
// agentbox binary cannot be built, so the store can still be measured.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentbox/agentbox/snapshot"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: snapbench save STORE DIR | restore STORE ID DIR")
		os.Exit(2)
	}
	s, err := snapshot.Open(os.Args[2], snapshot.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapbench:", err)
		os.Exit(125)
	}
	ctx := context.Background()
	switch {
	case os.Args[1] == "save":
		var id string
		if id, err = s.Save(ctx, os.Args[3], nil, 0); err == nil {
			fmt.Println(id)
		}
	case os.Args[1] == "restore" && len(os.Args) == 5:
		err = s.Restore(ctx, os.Args[3], os.Args[4], 0)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapbench:", err)
		os.Exit(125)
	}
}
