package main

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestATerminalResizeReachesTheCommand: agentbox exec --tty runs on the
// caller's terminal; when that terminal is resized, the command's own
// terminal takes the new size and the command gets SIGWINCH, as under
// docker run -t.
func TestATerminalResizeReachesTheCommand(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "exec", "--tty", "--", "sh", "-c", "trap 'stty size; exit' WINCH; stty size; while :; do sleep 0.05; done")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// The terminal is agentbox's controlling terminal, so the kernel sends
	// it SIGWINCH on a resize, as a shell's terminal would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(ptmx)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
		close(lines)
	}()
	want := func(size string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the terminal closed before the command printed %q", size)
				}
				if l == size {
					return
				}
			case <-deadline:
				t.Fatalf("the command never printed size %q", size)
			}
		}
	}
	want("24 80")
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 132}); err != nil {
		t.Fatal(err)
	}
	// The command learns of it as a program on a terminal does: SIGWINCH.
	want("50 132")
}
