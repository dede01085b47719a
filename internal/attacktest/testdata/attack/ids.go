package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func init() {
	// inotify-hold N makes up to N inotify instances, prints how many it
	// got, and holds them until its input ends: the per-user limit of
	// inotify instances is what it spends.
	register("inotify-hold", func(a []string) error {
		need(a, 1, "inotify-hold N")
		n, _ := strconv.Atoi(a[0])
		got := 0
		var last error
		for ; got < n; got++ {
			if _, err := unix.InotifyInit1(0); err != nil {
				last = err
				break
			}
		}
		fmt.Printf("inotify instances: %d (%v)\n", got, last)
		buf := make([]byte, 1)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				return nil
			}
		}
	})
}
