package cli

import (
	"os"
	"strconv"
)

// ownerLabel marks a session that one `agentbox exec` makes for itself and
// always closes: its value is that process's pid. A session whose owner is
// gone (killed before it could close it) is an orphan, which `agentbox gc`
// removes; sessions made through the library have no owner and are left.
const ownerLabel = "agentbox.exec-owner"

func ownerMark() string { return strconv.Itoa(os.Getpid()) }
