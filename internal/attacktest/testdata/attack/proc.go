package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	// ptrace-sibling starts a sleeping sibling and attaches to it.
	register("ptrace-sibling", func(a []string) error {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start the sibling: %w", err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		return ptraceAttach(cmd.Process.Pid, len(a) > 0 && a[0] == "seize")
	})
	register("ptrace", func(a []string) error {
		need(a, 1, "ptrace PID")
		pid, _ := strconv.Atoi(a[0])
		return ptraceAttach(pid, false)
	})
	register("process-vm-readv", func(a []string) error {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start the sibling: %w", err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		buf := make([]byte, 16)
		local := []unix.Iovec{{Base: &buf[0], Len: 16}}
		remote := []unix.RemoteIovec{{Base: 0x400000, Len: 16}}
		_, err := unix.ProcessVMReadv(cmd.Process.Pid, local, remote, 0)
		if err == unix.EFAULT || err == unix.EIO {
			return nil // the call went through; only the address was wrong
		}
		return err
	})
	register("kill", func(a []string) error {
		need(a, 2, "kill PID SIGNUM")
		pid, _ := strconv.Atoi(a[0])
		sig, _ := strconv.Atoi(a[1])
		return unix.Kill(pid, syscall.Signal(sig))
	})
	// signal-init-threads sends SIG to every thread of the init (pid 1),
	// with tgkill and queued with SI_QUEUE (a code a Go runtime takes
	// for a kernel one); it succeeds when any thread took either.
	register("signal-init-threads", func(a []string) error {
		need(a, 1, "signal-init-threads SIGNUM")
		sig, _ := strconv.Atoi(a[0])
		tasks, err := os.ReadDir("/proc/1/task")
		if err != nil {
			return err
		}
		last := error(unix.ESRCH)
		delivered := false
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			if err := unix.Tgkill(1, tid, syscall.Signal(sig)); err == nil {
				delivered = true
			} else {
				last = err
			}
			var info [128]byte // siginfo_t: si_signo, si_errno, si_code
			*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
			*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
			if _, _, errno := unix.Syscall6(unix.SYS_RT_TGSIGQUEUEINFO, 1, uintptr(tid), uintptr(sig), uintptr(unsafe.Pointer(&info[0])), 0, 0); errno == 0 {
				delivered = true
			} else {
				last = errno
			}
		}
		if delivered {
			return nil
		}
		return last
	})
	register("pidfd-open", func(a []string) error {
		need(a, 1, "pidfd-open PID")
		pid, _ := strconv.Atoi(a[0])
		fd, err := unix.PidfdOpen(pid, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	register("unshare", func(a []string) error {
		need(a, 1, "unshare user|mount|net|pid|ipc|uts|cgroup")
		return unix.Unshare(nsFlag(a[0]))
	})
	// clone-ns starts /bin/true in a new namespace through clone(2).
	register("clone-ns", func(a []string) error {
		need(a, 1, "clone-ns user|mount|net|pid|ipc|uts|cgroup")
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{
			Sys: &syscall.SysProcAttr{Cloneflags: uintptr(nsFlag(a[0]))},
		})
		if err != nil {
			return err
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
		return nil
	})
	register("setns", func(a []string) error {
		need(a, 1, "setns /proc/PID/ns/NAME")
		f, err := os.Open(a[0])
		if err != nil {
			return fmt.Errorf("open %s: %w", a[0], err)
		}
		defer f.Close()
		runtime.LockOSThread()
		return unix.Setns(int(f.Fd()), 0)
	})
	register("sethostname", func(a []string) error {
		return unix.Sethostname([]byte("escaped"))
	})
	// forkbomb starts sleeping children until the kernel refuses one,
	// then counts every task (thread) it can see and reports both.
	register("forkbomb", func(a []string) error {
		need(a, 1, "forkbomb MAX")
		max, _ := strconv.Atoi(a[0])
		var pids []int
		var err error
		for len(pids) < max {
			var pid int
			pid, err = syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{})
			if err != nil {
				break
			}
			pids = append(pids, pid)
		}
		fmt.Printf("started: %d\ntasks: %d\n", len(pids), countTasks("1"))
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		for _, p := range pids {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p, &ws, 0, nil)
		}
		return err
	})
	// alloc allocates MiB mebibytes and touches every page.
	register("alloc", func(a []string) error {
		need(a, 1, "alloc MIB")
		n, _ := strconv.Atoi(a[0])
		var chunks [][]byte
		for i := 0; i < n; i++ {
			c := make([]byte, 1<<20)
			for j := 0; j < len(c); j += 4096 {
				c[j] = 1
			}
			chunks = append(chunks, c)
		}
		fmt.Printf("allocated: %d MiB\n", len(chunks))
		return nil
	})
	register("ids", func(a []string) error {
		fmt.Printf("uid=%d euid=%d gid=%d egid=%d\n", os.Getuid(), os.Geteuid(), os.Getgid(), os.Getegid())
		f, err := os.Open("/proc/self/status")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Cap") || strings.HasPrefix(sc.Text(), "NoNewPrivs") || strings.HasPrefix(sc.Text(), "Seccomp:") {
				fmt.Println(sc.Text())
			}
		}
		if os.Geteuid() == 0 && os.Getuid() != 0 {
			return nil // a setuid bit took effect
		}
		return unix.EPERM
	})
	// tiocsti pushes a character into the input queue of the terminal on
	// stdin, as if the user typed it.
	register("tiocsti", func(a []string) error {
		c := byte('x')
		_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		return errnoOf(e)
	})
	register("sleep", func(a []string) error {
		need(a, 1, "sleep SECONDS")
		d, _ := time.ParseDuration(a[0] + "s")
		time.Sleep(d)
		return nil
	})
}

func ptraceAttach(pid int, seize bool) error {
	runtime.LockOSThread()
	var err error
	if seize {
		err = unix.PtraceSeize(pid)
	} else {
		err = unix.PtraceAttach(pid)
	}
	if err == nil {
		_ = unix.PtraceDetach(pid)
	}
	return err
}

func nsFlag(name string) int {
	flags := map[string]int{
		"user": unix.CLONE_NEWUSER, "mount": unix.CLONE_NEWNS, "net": unix.CLONE_NEWNET,
		"pid": unix.CLONE_NEWPID, "ipc": unix.CLONE_NEWIPC, "uts": unix.CLONE_NEWUTS,
		"cgroup": unix.CLONE_NEWCGROUP,
	}
	f, ok := flags[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "attack: unknown namespace %q\n", name)
		os.Exit(2)
	}
	return f
}

// countTasks counts the threads of every process in /proc but the one
// with pid except (the session's init, whose own threads the backend
// keeps out of the session's limits by design).
func countTasks(except string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	n := 0
	for _, d := range dirs {
		if !strings.HasPrefix(d, "/proc/"+except+"/") {
			n++
		}
	}
	return n
}
