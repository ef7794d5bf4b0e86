// Command pause is the process of a pod's sandbox ("pause") container, as Kubernetes'
// build/pause/linux/pause.c: it holds the pod's namespaces, reaps the children that a shared PID
// namespace hands it as PID 1, and exits 0 on SIGINT or SIGTERM. Built static (CGO_ENABLED=0), it
// is the whole content of the test node's sandbox image, so the node needs no image registry.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (roofline-operator test node)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for received := range signals {
		if received == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %s\n", received)
		os.Exit(0)
	}
}

// reap collects every exited child without blocking, as pause.c's sigreap does.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
