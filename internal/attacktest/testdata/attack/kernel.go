package main

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Attacks on kernel surface that is not namespaced or that is a common
// exploit path. Each uses arguments that would be harmless if the call
// went through.
func init() {
	register("keyctl", func(a []string) error {
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 1, 0, 0)
		return err
	})
	register("add-key", func(a []string) error {
		_, err := unix.AddKey("user", "agentbox-escapetest", []byte("planted"), unix.KEY_SPEC_PROCESS_KEYRING)
		return err
	})
	register("bpf", func(a []string) error {
		// BPF_MAP_CREATE of a one-entry array.
		attr := struct{ mapType, keySize, valueSize, maxEntries, flags uint32 }{2, 4, 4, 1, 0}
		fd, _, e := unix.Syscall(unix.SYS_BPF, 0, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if e == 0 {
			unix.Close(int(fd))
		}
		return errnoOf(e)
	})
	register("io-uring", func(a []string) error {
		var params [120]byte
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
		if e == 0 {
			unix.Close(int(fd))
		}
		return errnoOf(e)
	})
	register("perf-event-open", func(a []string) error {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	register("userfaultfd", func(a []string) error {
		fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
		if e == 0 {
			unix.Close(int(fd))
		}
		return errnoOf(e)
	})
	register("kexec-load", func(a []string) error {
		_, _, e := unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0, 0, 0)
		return errnoOf(e)
	})
	register("init-module", func(a []string) error {
		return unix.InitModule(nil, "")
	})
	register("finit-module", func(a []string) error {
		f, err := os.Open("/dev/null")
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.FinitModule(int(f.Fd()), "", 0)
	})
	register("reboot", func(a []string) error {
		// Disabling ctrl-alt-del is the harmless reboot command.
		return unix.Reboot(unix.LINUX_REBOOT_CMD_CAD_OFF)
	})
	register("clock-settime", func(a []string) error {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &ts); err != nil {
			return err
		}
		_, _, e := unix.Syscall(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, uintptr(unsafe.Pointer(&ts)), 0)
		return errnoOf(e)
	})
	register("swapon", func(a []string) error {
		_, _, e := unix.Syscall(unix.SYS_SWAPON, uintptr(unsafe.Pointer(bytePtr("/dev/null"))), 0, 0)
		return errnoOf(e)
	})
	register("syslog", func(a []string) error {
		buf := make([]byte, 256)
		_, err := unix.Klogctl(3, buf) // SYSLOG_ACTION_READ_ALL
		return err
	})
	register("raw-socket", func(a []string) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	register("packet-socket", func(a []string) error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0x0300) // htons(ETH_P_ALL)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
}
