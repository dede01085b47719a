package seccomp

// The system-call tables in zsyscalls.go come from the zsysnum_linux_*.go
// files of the golang.org/x/sys version in go.mod; gensyscalls' test fails
// when they differ from what it writes now.
//go:generate go run ./internal/gensyscalls -o zsyscalls.go
