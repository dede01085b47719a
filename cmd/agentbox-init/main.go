// Command agentbox-init is the native (linux) backend's session init as a
// program of its own: it links only the init side of the backend
// (package nsinit), which takes the process over before main runs when
// the backend starts it. The backend uses it when it sits beside the
// program that creates sessions (see linux.Options.InitBinary); any
// program that links the backend can serve as the init too, but starts
// slower, running its own dependencies' initialisers first.
package main

import (
	"fmt"
	"os"

	_ "github.com/agentbox/agentbox/sandbox/linux/nsinit"
)

func main() {
	fmt.Fprintln(os.Stderr, "agentbox-init: the linux sandbox backend starts this program; it is not run by hand")
	os.Exit(2)
}
