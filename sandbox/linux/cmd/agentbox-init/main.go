// Command agentbox-init is the linux backend's session init as a small
// binary of its own. The agentbox binary can serve as the init itself
// (linux.Main), but it starts slowly (its dependencies' package
// initialisers run first); when agentbox-init sits next to the agentbox
// executable, sessions start from it instead. It does nothing when not
// started by the backend.
package main

import (
	"fmt"
	"os"

	"github.com/agentbox/agentbox/sandbox/linux"
)

func main() {
	linux.Main()
	fmt.Fprintln(os.Stderr, "agentbox-init: the linux sandbox backend starts this program; it is not run by hand")
	os.Exit(2)
}
